import BackgroundTransfer
import TransferPOSIX

/// `<root>/AppGroups/group.com.example.transfers/Downloads/`: where the host keeps finished
/// downloads. Names come from the server or the URL and are never allowed to leave the folder.
public enum DownloadsFolder {
    public static func url() -> URL {
        let group = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: StandInIdentities.appGroup.rawValue)!
        return group.appendingPathComponent("Downloads")
    }

    /// A safe file name: the server's suggested name, else the URL's last path component,
    /// stripped of any directory part (also one percent-encoded in the URL), leading dots and
    /// blanks, control characters, direction controls and invisible spaces, cut to 200 bytes;
    /// "download" when nothing is left.
    public static func fileName(suggested: String?, url: URL?) -> String {
        for candidate in [suggested, url?.lastPathComponent] {
            guard let candidate else { continue }
            var name = candidate.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
            // No C0 or C1 control characters, no DEL; no direction controls or invisible
            // spaces (a right-to-left override would show "invoice\u{202E}fdp.exe" as
            // "invoiceexe.pdf"). Joiners stay: emoji sequences and some scripts need them.
            name = String(String.UnicodeScalarView(name.unicodeScalars.filter {
                $0.value >= 0x20 && !(0x7F...0x9F).contains($0.value) && !Self.hidden.contains($0.value)
            }))
            // Blanks and leading dots, in any mix: never ".", ".." or a hidden file.
            while let first = name.first, first == "." || first.isWhitespace { name.removeFirst() }
            name = name.trimmingCharacters(in: .whitespaces)
            // At most 200 bytes, cut on a character boundary.
            while name.utf8.count > 200 { name.removeLast() }
            if !name.isEmpty { return name }
        }
        return "download"
    }

    /// Bidirectional controls (LRM, RLM, ALM, the embeddings, overrides and isolates) and
    /// invisible spaces (zero-width space, word joiner, BOM).
    private static let hidden: Set<UInt32> = [0x061C, 0x200B, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF]

    /// Moves a delivered file into the folder, replacing an earlier file of the same name.
    public static func adopt(_ location: URL, name: String) throws -> URL {
        let folder = url()
        try DurableFile.makeDirectory(folder.path)
        let destination = folder.appendingPathComponent(name)
        guard destination.deletingLastPathComponent().standardizedFileURL.path == folder.standardizedFileURL.path else {
            throw UsageError("download name \"\(name)\" would leave \(folder.path)")
        }
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.moveItem(at: location, to: destination)
        // The file is ours now, and the move ours to make durable: once the event is
        // acknowledged the daemon keeps no copy, and a power cut would forget the new name.
        try DurableFile.syncDirectory(folder.path)
        return destination
    }
}
