import Foundation
import TransferContainer

/// What is made from a program's `CommandLineUsage` besides `--help`, so that one text is the
/// source of all: its man page (`--help-man`) and its shell completions (`--completions
/// bash|zsh|fish`), printed by the program itself and installed by `Examples/service/install.sh`.
/// Values; any thread.
extension CommandLineUsage {
    /// The man page, in roff (`man -l` renders it): NAME, SYNOPSIS from the forms, then the
    /// usage's own text as it prints it.
    public func manPage(section: Int) -> String {
        func escape(_ line: String) -> String {
            var text = line.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
            if text.hasPrefix(".") || text.hasPrefix("'") { text = "\\&" + text }
            return text
        }
        var lines = [".TH \(program.uppercased()) \(section) \"\" \"BackgroundTransfer \(ProductVersion.current)\" \"BackgroundTransfer\"",
                     ".SH NAME", "\(escape(program)) \\- \(escape(summary))", ".SH SYNOPSIS", ".nf"]
        lines += forms.map { ".B \(escape(program)) \(escape($0))" }
        lines += [".fi", ".SH DESCRIPTION", ".nf"]
        // The usage's own text, as --help prints it but for its first lines (the forms, above).
        lines += text.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(forms.count + 2).map { escape(String($0)) }
        lines += [".fi", ".SH VERSION", "BackgroundTransfer \(ProductVersion.current)"]
        return lines.joined(separator: "\n") + "\n"
    }

    /// The subcommands the usage describes (a line indented two spaces that starts with a
    /// lowercase word) with the options each one's description names, in order.
    var subcommands: [(name: String, options: [String])] {
        var found: [(name: String, options: [String])] = []
        for line in details.split(separator: "\n") {
            let body = line.drop { $0 == " " }
            let indent = line.count - body.count
            if indent == 2, let first = body.first, first.isLowercase, first.isLetter {
                found.append((String(body.prefix { !$0.isWhitespace }), []))
            }
            guard !found.isEmpty, indent >= 2 else { continue }
            for word in body.split(whereSeparator: { " []|,()".contains($0) }) where word.hasPrefix("--") && word.count > 2 {
                let option = String(word.prefix { $0.isLetter || $0.isNumber || $0 == "-" })
                if !found[found.count - 1].options.contains(option) { found[found.count - 1].options.append(option) }
            }
        }
        return found
    }

    /// Options every program takes.
    static let commonOptions = ["--container", "--help", "--version"]

    /// A completion script for `shell` (bash, zsh or fish); nil for another shell.
    public func completions(for shell: String) -> String? {
        let commands = subcommands
        let names = commands.map(\.name).joined(separator: " ")
        switch shell {
        case "bash":
            let cases = commands.map { "        \($0.name)) options=\"\($0.options.joined(separator: " "))\" ;;" }.joined(separator: "\n")
            return """
            # bash completion for \(program) (made by `\(program) --completions bash`)
            _\(program.replacingOccurrences(of: "-", with: "_"))() {
                local current=${COMP_WORDS[COMP_CWORD]} previous=${COMP_WORDS[COMP_CWORD-1]} command="" options="" word
                if [[ $previous == --container ]]; then COMPREPLY=($(compgen -d -- "$current")); return; fi
                for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
                    case " \(names) " in *" $word "*) command=$word; break ;; esac
                done
                case $command in
            \(cases)
                "") COMPREPLY=($(compgen -W "\(names) \(Self.commonOptions.joined(separator: " "))" -- "$current")); return ;;
                esac
                COMPREPLY=($(compgen -W "$options --container --help" -- "$current"))
            }
            complete -F _\(program.replacingOccurrences(of: "-", with: "_")) \(program)

            """
        case "zsh":
            let cases = commands.map { "    (\($0.name)) _arguments '*:option:(\($0.options.joined(separator: " ")))' ;;" }.joined(separator: "\n")
            return """
            #compdef \(program)
            # zsh completion for \(program) (made by `\(program) --completions zsh`)
            _arguments '--container[the container]:path:_files -/' '--help[show the help]' '--version[print the version]' '1:command:(\(names))' '*::argument:->argument'
            case $words[1] in
            \(cases)
            esac

            """
        case "fish":
            var lines = ["# fish completion for \(program) (made by `\(program) --completions fish`)",
                         "complete -c \(program) -l container -r -F -d 'the container'",
                         "complete -c \(program) -l help -d 'show the help'",
                         "complete -c \(program) -l version -d 'print the version'",
                         "complete -c \(program) -n '__fish_use_subcommand' -f -a '\(names)'"]
            for command in commands where !command.options.isEmpty {
                for option in command.options {
                    lines.append("complete -c \(program) -n '__fish_seen_subcommand_from \(command.name)' -l \(option.dropFirst(2))")
                }
            }
            return lines.joined(separator: "\n") + "\n"
        default:
            return nil
        }
    }
}
