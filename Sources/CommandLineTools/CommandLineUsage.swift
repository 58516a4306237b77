import Foundation
import TransferContainer

/// How every executable of the project answers its command line, after swift-argument-parser's
/// conventions: `--help` or `-h` prints the whole usage (program, subcommands, options,
/// `--container`) on stdout and exits 0, `--version` prints the program and `ProductVersion`; a command line that cannot be understood exits 64
/// (EX_USAGE) with one line naming what is wrong and a pointer to `--help`; any other failure
/// exits with its own status and one line naming the path or identifier at fault. A value;
/// each executable makes one at start.
public struct CommandLineUsage: Sendable {
    public let program: String
    /// The forms of the command line, one a line, without the program's name.
    public let forms: [String]
    /// What comes after the forms: subcommands and options, as the program explains them.
    public let details: String
    /// What `--container` defaults to, for the options' text.
    public let defaultContainer: String
    /// What the program is, in a few words (the man page's NAME line).
    public let summary: String

    public init(program: String, forms: [String], details: String, defaultContainer: String = "the first SharedContainer/ from the working directory upward",
                summary: String = "a program of BackgroundTransfer") {
        self.program = program
        self.forms = forms
        self.details = details
        self.defaultContainer = defaultContainer
        self.summary = summary
    }

    /// The whole usage, as `--help` prints it.
    public var text: String {
        var lines = ["USAGE:"]
        lines += forms.map { "  \(program) \($0)" }
        if !details.isEmpty { lines += ["", details] }
        lines += ["", "OPTIONS:",
                  "  --container PATH   the container, the device's file system (default: $BGTRANSFER_CONTAINER, else \(defaultContainer))",
                  "  -h, --help         show this help",
                  "  --version          print the version and exit"]
        return lines.joined(separator: "\n")
    }

    /// Prints the usage and exits 0 when `arguments` ask for help (`--help`, `-h`, or `help`
    /// as the first word); prints `<program> <version>` and exits 0 for `--version`.
    public func helpIfAsked(_ arguments: [String]) {
        guard Self.asksForItself(arguments) else { return }
        if arguments.contains("--version") {
            print("\(program) \(ProductVersion.current)")
            exit(0)
        }
        // What install.sh installs, made from this very usage (see CommandLineManual).
        if arguments.first == "--help-man" {
            print(manPage(section: program == "transferd" ? 8 : 1), terminator: "")
            exit(0)
        }
        if arguments.first == "--completions" {
            guard arguments.count == 2, let script = completions(for: arguments[1]) else { usageError("--completions needs bash, zsh or fish") }
            print(script, terminator: "")
            exit(0)
        }
        print(text)
        exit(0)
    }

    /// Whether `arguments` ask for something `helpIfAsked` answers: the usage, the version,
    /// the man page or the shell completions. A program whose usage costs something to build
    /// (a short-lived extension's start) builds it only then.
    public static func asksForItself(_ arguments: [String]) -> Bool {
        arguments.contains("--version") || arguments.contains("--help") || arguments.contains("-h")
            || ["help", "--help-man", "--completions"].contains(arguments.first)
    }

    /// A command line that cannot be understood: one line naming `problem`, a pointer to
    /// `--help`, status 64.
    public func usageError(_ problem: String) -> Never {
        FileHandle.standardError.write(Data("\(program): \(problem)\nSee '\(program) --help'.\n".utf8))
        exit(64)
    }

    /// Any other failure: one line naming it, `status`.
    public func fail(_ problem: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("\(program): \(problem)\n".utf8))
        exit(status)
    }

    /// What an argument that matches nothing is called in an error: an option or a word.
    public static func unknown(_ argument: String, what: String = "subcommand") -> String {
        argument.hasPrefix("-") ? "unknown option \(argument)" : "unknown \(what) \(argument)"
    }
}
