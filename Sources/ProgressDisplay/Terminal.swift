#if canImport(Glibc)
import Glibc
#endif
import CPOSIX

/// What a command needs of the terminal it draws on: whether a descriptor is one, how wide it
/// is, and the few ANSI sequences that redraw lines in place. Stateless.
public enum Terminal {
    public static let hideCursor = "\u{1B}[?25l"
    public static let showCursor = "\u{1B}[?25h"
    /// Erases the whole line the cursor is on (the cursor stays in its column).
    public static let eraseLine = "\u{1B}[2K"
    /// Erases from the cursor to the end of the screen.
    public static let eraseBelow = "\u{1B}[J"

    /// Moves the cursor up `lines` lines, to the first column.
    public static func up(_ lines: Int) -> String {
        lines > 0 ? "\r\u{1B}[\(lines)A" : "\r"
    }

    public static func isTerminal(_ fd: Int32) -> Bool {
        isatty(fd) == 1
    }

    /// The terminal's size (`TIOCGWINSZ`); 24 rows and 80 columns for what it does not say.
    public static func size(_ fd: Int32) -> (rows: Int, columns: Int) {
        var rows: Int32 = 0
        var columns: Int32 = 0
        guard cposix_terminal_size(fd, &rows, &columns) == 0 else { return (24, 80) }
        return (rows > 0 ? Int(rows) : 24, columns > 0 ? Int(columns) : 80)
    }

    /// Writes all of `text` at once, unbuffered (a redraw must not be split by stdio).
    public static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return } // the terminal went away: nothing left to draw on
            offset += n
        }
    }
}
