// swift-tools-version:6.0
import PackageDescription

// A third-party app and its widget, written against the library from the README alone, and
// a plain program with no app at all. `swift build --package-path Examples/Reader` builds
// them and `transferd` beside them, where the library looks for the daemon.
let package = Package(
    name: "Reader",
    dependencies: [
        .package(name: "BackgroundTransfer", path: "../.."),
    ],
    targets: [
        // The containing app, bundle com.example.reader.
        .executableTarget(name: "reader-app", dependencies: [
            .product(name: "BackgroundTransfer", package: "BackgroundTransfer"),
            .product(name: "transferd", package: "BackgroundTransfer"),
        ]),
        // Its widget extension, bundle com.example.reader.widget.
        .executableTarget(name: "reader-widget", dependencies: [
            .product(name: "BackgroundTransfer", package: "BackgroundTransfer"),
            .product(name: "transferd", package: "BackgroundTransfer"),
        ]),
        // "Just a program": no entitlements literal, no app group; Swift 5 language mode, as
        // much code written for iOS still is.
        .executableTarget(name: "fetch-later", dependencies: [
            .product(name: "BackgroundTransfer", package: "BackgroundTransfer"),
            .product(name: "transferd", package: "BackgroundTransfer"),
        ], swiftSettings: [.swiftLanguageMode(.v5)]),
        // Its tests: the app, the widget and the program run as transferd runs them, with the
        // testing library alone (`swift test --package-path Examples/Reader`).
        .testTarget(name: "ReaderTests", dependencies: [
            .product(name: "BackgroundTransferTesting", package: "BackgroundTransfer"),
        ]),
        // Code as written for iOS (UIApplication → BackgroundApplication), in Swift 5 language
        // mode: built to show that it compiles unchanged; nothing runs it.
        .target(name: "IOSCode", dependencies: [
            .product(name: "BackgroundTransfer", package: "BackgroundTransfer"),
        ], swiftSettings: [.swiftLanguageMode(.v5)]),
    ]
)
