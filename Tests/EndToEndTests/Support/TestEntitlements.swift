import Foundation
import BackgroundTransfer
import TransferContainer

/// What the test executable is entitled to act as: the in-process test app and its
/// extension, and the fuzzer's app. The daemon reads this text from the test binary, as it
/// does from every peer's executable (see `Entitlements`).
let testEntitlements = """
BGTRANSFER-ENTITLEMENTS-BEGIN
[{"bundleIdentifier": "com.example.tests", "kind": "app", "containingApp": "com.example.tests",
  "containingAppExecutable": "tests", "appGroups": ["group.com.example.tests"]},
 {"bundleIdentifier": "com.example.tests.ext", "kind": "extension", "containingApp": "com.example.tests",
  "containingAppExecutable": "tests", "appGroups": ["group.com.example.tests"]},
 {"bundleIdentifier": "com.example.fuzz", "kind": "app", "containingApp": "com.example.fuzz",
  "containingAppExecutable": "fuzz", "appGroups": []}]
BGTRANSFER-ENTITLEMENTS-END
"""

/// One identity the test executable declares.
func testIdentity(_ bundle: String) -> AppIdentity {
    guard let identity = try! Entitlements.identities(inDeclaration: testEntitlements).first(where: { $0.bundleIdentifier.rawValue == bundle }) else {
        preconditionFailure("the test executable declares no \(bundle)")
    }
    return identity
}
