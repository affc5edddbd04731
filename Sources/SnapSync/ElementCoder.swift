#if canImport(Foundation)
    public import Foundation  // JSONEncoder, JSONDecoder
#endif

/// Turns a typed value into the bytes of an `SnapshotIdentifier` or a `SnapshotPayload` and back: the
/// pluggable part of the typed façade (`RoomCoding`).
///
/// `.string` for `LosslessStringConvertible` values (UTF-8, what `scripts/snapcat` shows),
/// `.json` for `Codable` ones (sorted keys, so that equal values give equal bytes: an
/// identifier's bytes are its identity), `.identifier` / `.payload` for the raw model types,
/// or any pair of functions (`init(encode:decode:)`): a property list, a binary format.
public struct ElementCoder<Value: Sendable>: Sendable {
    private let encodeBody: @Sendable (Value) throws -> [UInt8]
    private let decodeBody: @Sendable ([UInt8]) throws -> Value

    /// `decode` throws (anything) when the bytes are not a value; so may `encode`.
    public init(encode: @escaping @Sendable (Value) throws -> [UInt8], decode: @escaping @Sendable ([UInt8]) throws -> Value) {
        encodeBody = encode
        decodeBody = decode
    }

    /// The value's bytes. The coder's error is described in the `ElementCodingError`.
    public func encode(_ value: Value, as role: ElementCodingError.Role, identifier: SnapshotIdentifier? = nil) throws(ElementCodingError) -> [UInt8] {
        do {
            return try encodeBody(value)
        } catch {
            throw ElementCodingError(role: role, direction: .encoding, identifier: identifier, message: "\(error)")
        }
    }

    /// The value the bytes hold.
    public func decode(_ bytes: [UInt8], as role: ElementCodingError.Role, identifier: SnapshotIdentifier?) throws(ElementCodingError) -> Value {
        do {
            return try decodeBody(bytes)
        } catch {
            throw ElementCodingError(role: role, direction: .decoding, identifier: identifier, message: "\(error)")
        }
    }
}

/// Why `.string` could not decode.
struct NotAStringValue: Error, CustomStringConvertible {
    var description: String
}

extension ElementCoder where Value: LosslessStringConvertible {
    /// The value's `description` as UTF-8; decoding needs valid UTF-8 that `init?(_:)` accepts.
    public static var string: ElementCoder {
        ElementCoder(
            encode: { Array($0.description.utf8) },
            decode: { bytes in
                guard let text = String(validating: bytes, as: UTF8.self) else { throw NotAStringValue(description: "not UTF-8") }
                guard let value = Value(text) else { throw NotAStringValue(description: "\"\(text)\" is not a \(Value.self)") }
                return value
            })
    }
}

extension ElementCoder where Value == SnapshotIdentifier {
    /// The identifier's own bytes.
    public static var identifier: ElementCoder { ElementCoder(encode: { $0.bytes }, decode: { SnapshotIdentifier($0) }) }
}

extension ElementCoder where Value == SnapshotPayload {
    /// The payload's own bytes.
    public static var payload: ElementCoder { ElementCoder(encode: { $0.bytes }, decode: { SnapshotPayload($0) }) }
}

#if canImport(Foundation)
    extension ElementCoder where Value: Codable {
        /// JSON, with sorted keys so that equal values give equal bytes. The closures make their
        /// own encoder and decoder per call (they are not `Sendable`).
        public static var json: ElementCoder {
            json(configure: { _ in }, configure: { _ in })
        }

        /// JSON with a configured encoder and decoder (date strategy, key strategy, ...).
        /// `outputFormatting` gets `.sortedKeys` added.
        public static func json(
            configure configureEncoder: @escaping @Sendable (JSONEncoder) -> Void,
            configure configureDecoder: @escaping @Sendable (JSONDecoder) -> Void
        ) -> ElementCoder {
            ElementCoder(
                encode: { value in
                    let encoder = JSONEncoder()
                    configureEncoder(encoder)
                    encoder.outputFormatting.insert(.sortedKeys)
                    return Array(try encoder.encode(value))
                },
                decode: { bytes in
                    let decoder = JSONDecoder()
                    configureDecoder(decoder)
                    return try decoder.decode(Value.self, from: Data(bytes))
                })
        }
    }
#endif
