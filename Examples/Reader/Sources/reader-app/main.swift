import BackgroundTransfer

// What this executable is entitled to (its Info.plist and entitlements, in effect). The
// daemon reads this very text from the executable file of every process that connects.
let entitlements = """
BGTRANSFER-ENTITLEMENTS-BEGIN
[{"bundleIdentifier": "com.example.reader", "kind": "app", "containingApp": "com.example.reader",
  "containingAppExecutable": "reader-app", "appGroups": ["group.com.example.reader"]}]
BGTRANSFER-ENTITLEMENTS-END
"""

BackgroundApplication.main(entitlements: entitlements, delegate: AppDelegate())
