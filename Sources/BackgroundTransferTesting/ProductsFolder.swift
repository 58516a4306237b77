import TransferPOSIX

/// Where a package's built executables are: SwiftPM builds every product of a package, the
/// test bundle among them, into one folder (`.build/debug`). A namespace; no state.
enum ProductsFolder {
    /// The folder of the running test executable.
    static var current: URL {
        URL(fileURLWithPath: (ProcessSpawner.currentExecutable as NSString).deletingLastPathComponent, isDirectory: true)
    }

    /// The executable `name` in the products folder, or a failure naming where it looked.
    static func executable(named name: String) throws(TestingFailure) -> URL {
        let candidate = current.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: candidate.path) else {
            throw TestingFailure(expected: "an executable product \(name) built beside the tests", happened: "\(candidate.path) is not there (does the test target depend on it, or a target that does?)")
        }
        return candidate
    }
}
