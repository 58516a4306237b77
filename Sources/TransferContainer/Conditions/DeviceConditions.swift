import Foundation
import TransferCoding

/// The simulated state of the device that background transfers depend on: which network
/// there is, whether it is expensive or constrained (Low Data Mode), power and Low Power
/// Mode. Kept in `Daemon/conditions.json`, changed by `bgtransfer conditions`, obeyed by the
/// daemon at once (S5). A value type; any thread.
public struct DeviceConditions: Codable, Sendable, Equatable, CustomStringConvertible {
    /// The network the device is on.
    public enum Network: String, Codable, Sendable, CaseIterable {
        case wifi
        case cellular
        case offline
    }

    /// Where the device's power comes from.
    public enum Power: String, Codable, Sendable, CaseIterable {
        case charging
        case battery
    }

    public var version = 1
    public var network: Network = .wifi
    /// The network is metered (a personal hotspot, roaming): `allowsExpensiveNetworkAccess`.
    public var expensive = false
    /// Low Data Mode is on: `allowsConstrainedNetworkAccess`.
    public var constrained = false
    public var power: Power = .charging
    public var lowPowerMode = false

    /// Wi-Fi, charging, nothing expensive or constrained, Low Power Mode off.
    public init() {}

    public var description: String {
        "network \(network.rawValue), expensive \(expensive ? "on" : "off"), constrained \(constrained ? "on" : "off"), power \(power.rawValue), low power mode \(lowPowerMode ? "on" : "off")"
    }

    /// What the container says, or the defaults when it says nothing. A file that cannot be
    /// read is an error (the caller decides whether to go on with the defaults).
    public static func load(from layout: ContainerLayout) throws(RecordError) -> DeviceConditions {
        let path = layout.deviceConditions.path
        guard FileManager.default.fileExists(atPath: path) else { return DeviceConditions() }
        return try checked(RecordCoding.read(DeviceConditions.self, from: path), path: path)
    }

    /// The conditions in `data`, read from `path`.
    public static func decode(_ data: Data, path: String) throws(RecordError) -> DeviceConditions {
        let conditions: DeviceConditions
        do { conditions = try RecordCoding.decode(DeviceConditions.self, from: data) } catch { throw .corrupt(path: path, reason: "\(error)") }
        return try checked(conditions, path: path)
    }

    private static func checked(_ conditions: DeviceConditions, path: String) throws(RecordError) -> DeviceConditions {
        guard conditions.version == 1 else { throw .unsupportedVersion(path: path, version: conditions.version) }
        return conditions
    }

    /// Writes the conditions durably (a running daemon must then be told: `DaemonRequest.conditionsChanged`).
    public func save(to layout: ContainerLayout) throws {
        try RecordCoding.write(self, to: layout.deviceConditions.path)
    }
}
