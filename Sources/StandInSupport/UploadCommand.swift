import BackgroundTransfer

/// `upload FILE URL [--method PUT|POST] [--description TEXT] [--session ID] [--wait]` and
/// the scheduling options: the upload command line of the stand-in extensions.
public struct UploadCommand {
    public var file: String
    public var url: String
    public var method = "PUT"
    public var taskDescription: String?
    public var sessionIdentifier: String?
    public var wait = false
    public var scheduling = SchedulingOptions()

    public static let usage = "upload FILE URL [--method PUT|POST] [--description TEXT] [--session IDENTIFIER] [--wait] \(SchedulingOptions.usage)"

    public init(arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        guard let file = rest.popFirst(), let url = rest.popFirst() else { throw UsageError("upload needs a FILE and a URL") }
        self.file = file
        self.url = url
        while let option = rest.popFirst() {
            switch option {
            case "--method":
                guard let method = rest.popFirst()?.uppercased(), ["PUT", "POST"].contains(method) else { throw UsageError("--method takes PUT or POST") }
                self.method = method
            case "--description": taskDescription = try optionValue(for: option, &rest)
            case "--session": sessionIdentifier = try optionValue(for: option, &rest)
            case "--wait": wait = true
            default:
                guard try scheduling.parse(option, &rest) else { throw UsageError("unknown option \(option)") }
            }
        }
    }
}

extension StandInProgram {
    /// Copies the file into the app group (where an extension's files must be for the daemon to
    /// read them) unless it is there already, starts the upload in the process's background
    /// session, prints the task identifier, and removes the copy: from then on the daemon
    /// holds what it needs.
    static func startUpload(_ command: UploadCommand, delegate: StandInDelegate) -> (URLSession, URLSessionUploadTask)? {
        guard let url = URL(string: command.url), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false else {
            complain("refusing \"\(command.url)\": background sessions upload to http and https URLs only")
            return nil
        }
        let source = URL(fileURLWithPath: command.file).standardizedFileURL
        let group = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: StandInIdentities.appGroup.rawValue)!.standardizedFileURL
        var copy = source
        var staging: URL?
        if !source.path.hasPrefix(group.path + "/") {
            let directory = group.appendingPathComponent("Uploads").appendingPathComponent(UUID().uuidString)
            copy = directory.appendingPathComponent(source.lastPathComponent)
            staging = directory
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                try FileManager.default.copyItem(at: source, to: copy)
            } catch {
                complain("cannot copy \(command.file) into the app group: \(error.localizedDescription)")
                return nil
            }
        }
        defer { if let staging { try? FileManager.default.removeItem(at: staging) } }
        guard let session = openSession(command.sessionIdentifier, scheduling: command.scheduling, delegate: delegate) else { return nil }
        var request = URLRequest(url: url)
        request.httpMethod = command.method
        let task = session.uploadTask(with: request, fromFile: copy)
        guard handOver(task, in: session, description: command.taskDescription, scheduling: command.scheduling, wait: command.wait, delegate: delegate,
                       note: "started upload task \(task.taskIdentifier) of \(command.file) to \(url.absoluteString) (\(command.method))") else { return nil }
        return (session, task)
    }
}
