// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "BackgroundTransfer",
    products: [
        .library(name: "BackgroundTransfer", targets: ["BackgroundTransfer"]),
        .library(name: "TransferContainer", targets: ["TransferContainer"]),
        .library(name: "TransferEngine", targets: ["TransferEngine"]),
        .library(name: "TransferTransport", targets: ["TransferTransport"]),
        .library(name: "LoopbackServer", targets: ["LoopbackServer"]),
        .library(name: "BackgroundTransferTesting", targets: ["BackgroundTransferTesting"]),
        .executable(name: "transferd", targets: ["transferd"]),
        .executable(name: "host-app", targets: ["host-app"]),
        .executable(name: "share-extension", targets: ["share-extension"]),
        .executable(name: "fetch-extension", targets: ["fetch-extension"]),
        .executable(name: "bgtransfer", targets: ["bgtransfer"]),
    ],
    targets: [
        // Typed C wrappers around libcurl (variadic setopt/getinfo cannot be called from Swift).
        // libcurl's ABI as far as it is used is declared in include/CurlABI.h, and libcurl.so.4 is loaded
        // when first called (LazyCurl.c): building needs no libcurl headers and links no libcurl.
        .target(name: "CCurl", dependencies: ["CLazyLoad"]),
        // The shared container: layout, identifiers, durable records, the session coordinator,
        // the wire protocol, server trust and credentials. Used by every executable.
        .target(name: "TransferContainer", dependencies: ["TransferCoding", "TransferPOSIX", "Digests", "CPOSIX", "CLibcrypto"]),
        // Typed wrappers around POSIX, in swift-system's style: file descriptors, errno, Unix
        // sockets, durable writes, file locks, spawned processes, and the lock threads share state behind.
        .target(name: "TransferPOSIX", dependencies: ["CPOSIX"]),
        // The JSON coder the records and frames are written with (compact, and Foundation's with
        // the records' settings), and the ISO 8601 dates in them.
        .target(name: "TransferCoding"),
        // The log every process appends to in the container (`Logs/transfer.log`), its typed
        // facts, and the journal's form of a line.
        .target(name: "TransferLogging", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX"]),
        // SHA-256 over the system's libcrypto: server key pins, and files checked against served ones.
        .target(name: "Digests", dependencies: ["CLibcrypto", "TransferPOSIX"]),
        // HTTP's date format (IMF-fixdate), written by the loopback server and read in `Retry-After`.
        .target(name: "HTTPFormats"),
        // How every executable answers its command line (`--help`, `--version`, the man page).
        .target(name: "CommandLineTools", dependencies: ["TransferContainer"]),
        // The few GNU/Linux calls Glibc's Swift module hides (SO_PEERCRED, accept4, O_PATH, setsid spawn).
        .target(name: "CPOSIX"),
        // SHA-256 and chain checks from the system's libcrypto (OpenSSL 3, EVP): server key
        // pins, file checks. libcrypto is loaded when first called (`LazyCrypto.c`).
        .target(name: "CLibcrypto", dependencies: ["CLazyLoad"]),
        // A shared library loaded when one of its functions is first called, not at start:
        // libcurl and libcrypto, which an app extension that only hands over a task never calls.
        .target(name: "CLazyLoad"),
        // Transfers and their transport: one download or upload over libcurl, the loop that
        // drives them, the libcurl → URLError mapping and the retry policy. The daemon and
        // default (foreground) sessions both run transfers through it.
        .target(name: "TransferTransport", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX", "HTTPFormats", "CCurl"]),
        // The daemon's engine: socket server, sessions and their durable records, scheduler,
        // commits, relauncher. Nothing of it is reachable from the client library.
        .target(name: "TransferEngine", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX",
                                                      "TransferLogging", "TransferTransport", "CPOSIX", "Digests"]),
        // The client API with Apple's names (URLSession, URLSessionConfiguration, delegates).
        // Default (foreground) sessions run transfers in-process through TransferTransport.
        .target(name: "BackgroundTransfer", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX", "TransferLogging", "TransferTransport"]),
        // A small HTTP/1.1 server on POSIX sockets for tests, the demo and the benchmark.
        .target(name: "LoopbackServer", dependencies: ["TransferPOSIX", "Digests", "HTTPFormats"]),
        // For adopters' test targets: a device per test (container, transferd, kills, force quit,
        // conditions), their executables launched as the daemon launches them, the typed record
        // of their delegate calls, the LoopbackServer. Depends on transferd so that it is built beside the tests.
        .target(name: "BackgroundTransferTesting", dependencies: ["BackgroundTransfer", "TransferContainer", "TransferPOSIX", "LoopbackServer", "TestPeers", "transferd"]),
        // What the tools read about a container without its daemon: the snapshot `inspect` shows, the log as it grows.
        .target(name: "ContainerInspection", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX", "TransferLogging"]),
        // Progress drawn on a terminal by the tools and the stand-ins' --wait: bars, rates, time left.
        .target(name: "ProgressDisplay", dependencies: ["CPOSIX"]),
        // Real peers from outside the project for tests and the benchmark: Debian's nginx over
        // TLS and HTTP/2, certificates made by openssl. Test support, never shipped.
        .target(name: "TestPeers"),
        // What the stand-in app and extensions share: identities, command lines, Downloads/.
        .target(name: "StandInSupport", dependencies: ["BackgroundTransfer", "TransferContainer", "TransferCoding", "TransferPOSIX", "CommandLineTools", "ProgressDisplay"]),

        .executableTarget(name: "transferd", dependencies: ["TransferEngine", "TransferContainer", "TransferLogging", "CommandLineTools"]),
        .executableTarget(name: "host-app", dependencies: ["StandInSupport"]),
        .executableTarget(name: "share-extension", dependencies: ["StandInSupport"]),
        .executableTarget(name: "fetch-extension", dependencies: ["StandInSupport"]),
        // The developer tool; it depends on the other executables so that `swift run bgtransfer demo` builds them.
        .executableTarget(name: "bgtransfer", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX", "TransferLogging", "Digests", "CommandLineTools", "ContainerInspection", "ProgressDisplay", "LoopbackServer", "transferd", "host-app", "fetch-extension", "share-extension"]),

        // The differential test's client (ForegroundParityTests): one main.swift (the library's
        // target holds a symlink to it), built against FoundationNetworking and against this library.
        .executableTarget(name: "parity-foundation"),
        .executableTarget(name: "parity-library", dependencies: ["BackgroundTransfer"], swiftSettings: [.define("PARITY_LIBRARY")]),

        // Benchmarks against curl and kill-recovery figures: `swift run -c release transfer-bench`.
        .executableTarget(name: "transfer-bench", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX", "TransferLogging", "Digests", "ContainerInspection", "LoopbackServer", "BackgroundTransfer", "TestPeers", "transferd", "host-app", "fetch-extension", "share-extension"]),

        .testTarget(name: "TransferContainerTests", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX", "TransferLogging", "ContainerInspection", "ProgressDisplay", "StandInSupport"]),
        .testTarget(name: "LoopbackServerTests", dependencies: ["LoopbackServer", "TransferPOSIX", "Digests", "HTTPFormats", "TestPeers"]),
        .testTarget(name: "TransferTransportTests", dependencies: ["TransferTransport", "TransferContainer", "LoopbackServer", "TestPeers"]),
        .testTarget(name: "TransferEngineTests", dependencies: ["TransferEngine", "TransferTransport", "TransferContainer", "TransferCoding", "TransferPOSIX", "TransferLogging", "HTTPFormats", "LoopbackServer"]),
        // Real processes from the built executables, real sockets, real SIGKILLs.
        .testTarget(name: "EndToEndTests", dependencies: ["TransferContainer", "TransferCoding", "TransferPOSIX", "TransferLogging", "Digests", "HTTPFormats", "ContainerInspection", "LoopbackServer", "BackgroundTransfer", "StandInSupport",
                                                          "transferd", "host-app", "fetch-extension", "share-extension", "bgtransfer", "TestPeers",
                                                          "parity-foundation", "parity-library", "BackgroundTransferTesting"]),
    ],
    swiftLanguageModes: [.v6]
)
