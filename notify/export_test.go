package notify

// AppleScriptString exposes the AppleScript quoting for a pure test.
var AppleScriptString = appleScriptString
