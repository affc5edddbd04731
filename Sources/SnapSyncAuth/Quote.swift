/// `text` for a log line or an error message: in quotes, control characters escaped, cut to
/// 64 characters. Used for the strings a client chose (a kid, a right, an audience), so that
/// they can neither forge log lines nor make one long.
func quote(_ text: some StringProtocol) -> String {
    let limit = 64
    let cut = text.count > limit ? String(text.prefix(limit)) + "..." : String(text)
    return String(reflecting: cut)
}
