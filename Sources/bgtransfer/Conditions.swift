import Foundation
import TransferContainer
import TransferPOSIX

/// `bgtransfer conditions [--network wifi|cellular|offline] [--expensive on|off]
/// [--constrained on|off] [--power charging|battery] [--low-power on|off]`: changes the
/// simulated device conditions (durable in the container) and tells a running daemon, which
/// obeys them at once; without options, prints them.
enum ConditionsCommand {
    static let usage = "usage: bgtransfer conditions [--network wifi|cellular|offline] [--expensive on|off] [--constrained on|off] [--power charging|battery] [--low-power on|off]"

    static func run(layout: ContainerLayout, arguments: [String]) {
        var conditions: DeviceConditions
        do { conditions = try DeviceConditions.load(from: layout) } catch {
            FileHandle.standardError.write(Data("bgtransfer: \(error); starting from the defaults\n".utf8))
            conditions = DeviceConditions()
        }
        var rest = arguments[...]
        var changed = false
        while let option = rest.popFirst() {
            guard let value = rest.popFirst() else { Tool.fail("\(option) needs a value", status: 64) }
            switch option {
            case "--network": conditions.network = choice(value, for: option)
            case "--power": conditions.power = choice(value, for: option)
            case "--expensive": conditions.expensive = onOff(value, for: option)
            case "--constrained": conditions.constrained = onOff(value, for: option)
            case "--low-power": conditions.lowPowerMode = onOff(value, for: option)
            default: Tool.fail("conditions: unknown option \(option)", status: 64)
            }
            changed = true
        }
        if changed {
            do {
                try layout.prepare()
                try conditions.save(to: layout)
            } catch {
                Tool.fail("cannot write \(layout.deviceConditions.path): \(error)", status: 1)
            }
            // A daemon that is not running reads them when it starts.
            if FileLock.isHeld(layout.daemonLock.path) {
                do { _ = try DaemonEndpoint.request(.conditionsChanged, as: Tool.hello, layout: layout) } catch {
                    Tool.fail("conditions saved, but the running daemon did not take them: \(error)", status: 1)
                }
            }
        }
        print(conditions)
    }

    private static func choice<Value: RawRepresentable & CaseIterable>(_ value: String, for option: String) -> Value where Value.RawValue == String {
        guard let chosen = Value(rawValue: value) else {
            Tool.fail("\(option) takes \(Value.allCases.map(\.rawValue).joined(separator: "|")), not \(value)", status: 64)
        }
        return chosen
    }

    private static func onOff(_ value: String, for option: String) -> Bool {
        switch value {
        case "on": return true
        case "off": return false
        default: Tool.fail("\(option) takes on|off, not \(value)", status: 64)
        }
    }
}
