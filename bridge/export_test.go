package bridge

// DurableClientID is durableClientID, for the external tests that open the
// bridge's durable subscriptions themselves.
var DurableClientID = durableClientID
