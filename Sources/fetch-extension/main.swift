import StandInSupport

// The fetch extension: starts background downloads in its own session and exits at once.
StandInProgram.runExtension(StandInIdentities.fetchExtension)
