import BackgroundTransfer
import TransferPOSIX

/// The host app's queue of downloads to start later, one each time the system launches it
/// in the background (as a podcast app fetches the next episode when one finishes): a text
/// file of URLs in the app's private container, `Library/download-queue.txt`. Tasks it starts
/// are created in the background, so they are discretionary and wait out the resume rate
/// limiter (S5, S6.5). Used from the main thread of the host app only.
enum DownloadQueue {
    static var file: URL {
        AppEnvironment.layout.privateContainer(StandInIdentities.hostBundle).appendingPathComponent("Library/download-queue.txt")
    }

    /// `host-app enqueue URL`.
    static func append(_ url: String) throws {
        try DurableFile.makeDirectory(file.deletingLastPathComponent().path)
        let lines = (read() + [url]).joined(separator: "\n") + "\n"
        try DurableFile.write(Data(lines.utf8), to: file.path) // 0600, as every file of the container
    }

    /// Takes the first URL off the queue.
    static func popFirst() -> String? {
        var urls = read()
        guard !urls.isEmpty else { return nil }
        let first = urls.removeFirst()
        let rest = urls.isEmpty ? "" : urls.joined(separator: "\n") + "\n"
        try? DurableFile.write(Data(rest.utf8), to: file.path)
        return first
    }

    private static func read() -> [String] {
        ((try? String(contentsOf: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }
}
