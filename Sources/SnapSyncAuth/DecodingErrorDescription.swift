/// A decoding error as "where: what was expected" (`rooms[0].rights is missing`), without the
/// value found: the error messages of a token must not repeat it.
func describeDecodingError(_ error: any Error, root: String) -> String {
    guard let error = error as? DecodingError else { return "\(root) cannot be read" }
    func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += (text.isEmpty ? "" : ".") + key.stringValue
            }
        }
        return text.isEmpty ? root : text
    }
    switch error {
    case .keyNotFound(let key, let context):
        return "\(path(context.codingPath + [key])) is missing"
    case .valueNotFound(_, let context):
        return "\(path(context.codingPath)) is null"
    case .typeMismatch(let type, let context):
        return "\(path(context.codingPath)) is not \(describe(type))"
    case .dataCorrupted(let context):
        return context.codingPath.isEmpty ? "\(root) is not JSON" : "\(path(context.codingPath)) is not valid"
    @unknown default:
        return "\(root) cannot be read"
    }
}

private func describe(_ type: Any.Type) -> String {
    if type == String.self { return "a string" }
    if type == Double.self || type == Int.self || type == Int64.self { return "a number" }
    if type == [Any].self { return "an array" }
    if type == [String: Any].self { return "a JSON object" }
    return "a \(type)"
}
