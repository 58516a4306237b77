/// A coding key made at run time for the compact JSON coder's coding paths: an object
/// member's name, an array position (`Index 3`, as Foundation names them), or `super`.
/// A value.
struct JSONKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        intValue = nil
    }

    init(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }

    /// The position of an element in an array.
    init(index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }

    /// The key `superEncoder()` and `superDecoder()` use.
    static let `super` = JSONKey(stringValue: "super")
}
