import StandInSupport

// What this executable is entitled to. The daemon reads this very text from the executable
// file of every process that connects, so a process cannot claim more (see `Entitlements`).
let entitlements = """
BGTRANSFER-ENTITLEMENTS-BEGIN
[{"bundleIdentifier": "com.example.host", "kind": "app", "containingApp": "com.example.host",
  "containingAppExecutable": "host-app", "appGroups": ["group.com.example.transfers"]}]
BGTRANSFER-ENTITLEMENTS-END
"""

// The containing app (see StandInSupport/HostApp.swift).
HostApp.main(entitlements: entitlements)
