import StandInSupport

// The containing app (see StandInSupport/HostApp.swift).
HostApp.main()
