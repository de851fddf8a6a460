package netconnector_test

import (
	"testing"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/netconnector"
)

// TestBridgeTempDestinationsReachesTheDemand: a connector's
// bridgeTempDestinations, on by default, is the demand table's BridgeTemp.
func TestBridgeTempDestinationsReachesTheDemand(t *testing.T) {
	nc := config.DefaultConnector()
	if !netconnector.DemandOptions(nc).BridgeTemp {
		t.Error("default connector: BridgeTemp off, want on")
	}
	nc.BridgeTempDestinations = false
	if netconnector.DemandOptions(nc).BridgeTemp {
		t.Error("bridgeTempDestinations = false: BridgeTemp on")
	}
}
