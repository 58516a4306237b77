/// The project's one version string: every executable's `--version`, the client library's
/// `User-Agent` and the installed man pages read it here. A constant; any thread.
public enum ProductVersion {
    public static let current = "1.0"
}
