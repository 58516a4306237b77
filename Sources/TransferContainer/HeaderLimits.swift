/// The bounds on HTTP headers the daemon carries, in one place (README "Limits"). Plain
/// constants, read from any thread.
public enum HeaderLimits {
    /// Bytes of one response's header block (status line and every header line). Below
    /// libcurl's own 300 KB total, so our check, not a libcurl receive error, ends the
    /// exchange; libcurl refuses one line over 100 KB itself ("Out of memory").
    public static let responseHeaderBytes = 256 * 1024
    /// Lines in one response's header block.
    public static let responseHeaderLines = 1_000
}
