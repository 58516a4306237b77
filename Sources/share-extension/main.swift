import StandInSupport

// The share extension: starts background transfers in its own session and exits at once.
StandInProgram.runExtension(StandInIdentities.shareExtension)
