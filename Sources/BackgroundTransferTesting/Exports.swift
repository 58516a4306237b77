// The test HTTP server is the LoopbackServer itself (routes with ranges and changing
// validators, stalls and trickles, 5xx with Retry-After, 401/407, resumable uploads, counts
// of what it received): re-exported, not wrapped, so that a test target needs this product only.
@_exported import LoopbackServer
@_exported import BackgroundTransfer
