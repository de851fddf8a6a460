package openwire

import (
	"fmt"
	"reflect"
	"strconv"
)

// Data structure type codes (org.apache.activemq.command.CommandTypes).
const (
	typeWireFormatInfo         = 1
	typeBrokerInfo             = 2
	typeConnectionInfo         = 3
	typeSessionInfo            = 4
	typeConsumerInfo           = 5
	typeProducerInfo           = 6
	typeTransactionInfo        = 7
	typeDestinationInfo        = 8
	typeRemoveSubscriptionInfo = 9
	typeKeepAliveInfo          = 10
	typeShutdownInfo           = 11
	typeRemoveInfo             = 12
	typeConnectionError        = 16
	typeConnectionControl      = 18
	typeMessageDispatch        = 21
	typeMessageAck             = 22
	typeMessage                = 23 // ActiveMQMessage
	typeBytesMessage           = 24
	typeMapMessage             = 25
	typeObjectMessage          = 26
	typeStreamMessage          = 27
	typeTextMessage            = 28
	typeBlobMessage            = 29
	typeResponse               = 30
	typeExceptionResponse      = 31
	typeDataResponse           = 32
	typeDataArrayResponse      = 33
	typeIntegerResponse        = 34
	typeNetworkBridgeFilter    = 91
	typeQueue                  = 100
	typeTopic                  = 101
	typeTempQueue              = 102
	typeTempTopic              = 103
	typeMessageID              = 110
	typeLocalTransactionID     = 111
	typeXATransactionID        = 112
	typeConnectionID           = 120
	typeSessionID              = 121
	typeConsumerID             = 122
	typeProducerID             = 123
	typeBrokerID               = 124
)

// MessageAck types (MessageAck.*_ACK_TYPE).
const (
	ackDelivered  = 0
	ackPoison     = 1
	ackStandard   = 2
	ackRedeliver  = 3
	ackIndividual = 4
)

// TransactionInfo types.
const (
	txBegin          = 0
	txCommitOnePhase = 2
	txRollback       = 4
)

// dataStructure is an OpenWire data structure this package can marshal. The
// encoding of each is its fields in the order of the v12 marshallers
// (org.apache.activemq.openwire.v12.*Marshaller.looseMarshal and
// tightMarshal1/2, which visit the fields in the same order), commands first
// with BaseCommand's commandId and responseRequired. The writer and reader
// know the encoding: in tight encoding booleans and presence flags become
// bits of the frame's BooleanStream and longs shrink. With the marshal cache
// disabled, a "cached" object is encoded as a nested one.
type dataStructure interface {
	dsType() byte
	marshal(w *writer)
	unmarshal(r *reader)
}

// command is a top-level data structure with BaseCommand's fields.
type command interface {
	dataStructure
	base() *baseCommand
}

type baseCommand struct {
	CommandID        int32
	ResponseRequired bool
}

func (b *baseCommand) base() *baseCommand { return b }
func (b *baseCommand) marshalBase(w *writer) {
	w.i32(b.CommandID)
	w.bool(b.ResponseRequired)
}
func (b *baseCommand) unmarshalBase(r *reader) {
	b.CommandID = r.i32()
	b.ResponseRequired = r.bool()
}

// newDataStructure returns an empty structure of type t, or nil for a type
// this package does not read.
func newDataStructure(t byte) dataStructure {
	switch t {
	case typeWireFormatInfo:
		return &wireFormatInfo{}
	case typeBrokerInfo:
		return &brokerInfo{}
	case typeConnectionInfo:
		return &connectionInfo{}
	case typeSessionInfo:
		return &sessionInfo{}
	case typeConsumerInfo:
		return &consumerInfo{}
	case typeProducerInfo:
		return &producerInfo{}
	case typeTransactionInfo:
		return &transactionInfo{}
	case typeDestinationInfo:
		return &destinationInfo{}
	case typeRemoveSubscriptionInfo:
		return &removeSubscriptionInfo{}
	case typeKeepAliveInfo:
		return &keepAliveInfo{}
	case typeShutdownInfo:
		return &shutdownInfo{}
	case typeConnectionControl:
		return &connectionControl{}
	case typeRemoveInfo:
		return &removeInfo{}
	case typeConnectionError:
		return &connectionError{}
	case typeMessageDispatch:
		return &messageDispatch{}
	case typeMessageAck:
		return &messageAck{}
	case typeMessage, typeBytesMessage, typeMapMessage, typeObjectMessage, typeStreamMessage, typeTextMessage, typeBlobMessage:
		return &message{Type: t}
	case typeResponse:
		return &response{}
	case typeExceptionResponse:
		return &exceptionResponse{}
	case typeDataResponse:
		return &dataResponse{}
	case typeIntegerResponse:
		return &integerResponse{}
	case typeNetworkBridgeFilter:
		return &networkBridgeFilter{}
	case typeQueue, typeTopic, typeTempQueue, typeTempTopic:
		return &dest{Type: t}
	case typeMessageID:
		return &messageID{}
	case typeLocalTransactionID:
		return &localTxID{}
	case typeXATransactionID:
		return &xaTxID{}
	case typeConnectionID:
		return &connectionID{}
	case typeSessionID:
		return &sessionID{}
	case typeConsumerID:
		return &consumerID{}
	case typeProducerID:
		return &producerID{}
	case typeBrokerID:
		return &brokerID{}
	case typeBrokerSubscriptionInfo:
		return &brokerSubscriptionInfo{}
	}
	return nil
}

// nested writes an optional nested object (looseMarshalNestedObject).
func (w *writer) nested(ds dataStructure) {
	if ds == nil || reflect.ValueOf(ds).IsNil() {
		w.bool(false)
		return
	}
	w.bool(true)
	if w.tight && marshallAware(ds.dsType()) {
		w.putBit(false) // no cached marshalled form
	}
	w.u8(ds.dsType())
	ds.marshal(w)
}

// marshallAware reports the types whose nested tight encoding has one more
// bit, for a cached marshalled form (Message, WireFormatInfo:
// isMarshallAware; OpenWireFormat.tightMarshalNestedObject1).
func marshallAware(t byte) bool {
	return t == typeWireFormatInfo || (t >= typeMessage && t <= typeBlobMessage)
}

// nested reads an optional nested object; nil when absent.
func (r *reader) nested() dataStructure {
	if !r.bool() || r.err != nil {
		return nil
	}
	t := r.u8()
	ds := newDataStructure(t)
	if ds == nil {
		r.fail("unknown nested data type %d", t)
		return nil
	}
	if r.tight && marshallAware(t) && r.nextBit() {
		// Java never sends a cached marshalled form (the code is commented out).
		r.fail("nested type %d in cached marshalled form", t)
		return nil
	}
	r.depth++
	if r.depth > maxNesting {
		r.fail("objects nested too deeply")
	} else {
		ds.unmarshal(r)
	}
	r.depth--
	if r.err != nil {
		return nil
	}
	return ds
}

// nestedAs reads an optional nested object that must be a T.
func nestedAs[T dataStructure](r *reader, field string) T {
	var zero T
	ds := r.nested()
	if ds == nil {
		return zero
	}
	v, ok := ds.(T)
	if !ok {
		r.fail("field %s: unexpected %T", field, ds)
		return zero
	}
	return v
}

// array writes an optional object array (looseMarshalObjectArray); nil is absent.
func writeArray[T dataStructure](w *writer, items []T) {
	w.bool(items != nil)
	if items != nil {
		w.i16(int16(len(items)))
		for _, it := range items {
			w.nested(it)
		}
	}
}

// readArray reads an optional object array of T.
func readArray[T dataStructure](r *reader, field string) []T {
	if !r.bool() {
		return nil
	}
	n := int(r.i16())
	if n < 0 || n > len(r.b)-r.off {
		r.fail("field %s: array of %d", field, n)
		return nil
	}
	items := make([]T, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		items = append(items, nestedAs[T](r, field))
	}
	return items
}

// --- identifiers ---

type connectionID struct{ Value string }

func (*connectionID) dsType() byte          { return typeConnectionID }
func (x *connectionID) marshal(w *writer)   { w.str(x.Value) }
func (x *connectionID) unmarshal(r *reader) { x.Value = r.optName() }

type sessionID struct {
	ConnectionID string
	Value        int64
}

func (*sessionID) dsType() byte { return typeSessionID }
func (x *sessionID) marshal(w *writer) {
	w.str(x.ConnectionID)
	w.i64(x.Value)
}
func (x *sessionID) unmarshal(r *reader) {
	x.ConnectionID = r.optName()
	x.Value = r.i64()
}

type consumerID struct {
	ConnectionID string
	SessionID    int64
	Value        int64
}

func (*consumerID) dsType() byte { return typeConsumerID }
func (x *consumerID) marshal(w *writer) {
	w.str(x.ConnectionID)
	w.i64(x.SessionID)
	w.i64(x.Value)
}
func (x *consumerID) unmarshal(r *reader) {
	x.ConnectionID = r.optName()
	x.SessionID = r.i64()
	x.Value = r.i64()
}

// String is ConsumerId.toString: "connectionId:sessionId:value", the form
// advisories carry.
func (x *consumerID) String() string {
	if x == nil {
		return ""
	}
	return x.ConnectionID + ":" + strconv.FormatInt(x.SessionID, 10) + ":" + strconv.FormatInt(x.Value, 10)
}

// producerID: note the wire order value, sessionId (ProducerIdMarshaller).
type producerID struct {
	ConnectionID string
	Value        int64
	SessionID    int64
}

func (*producerID) dsType() byte { return typeProducerID }
func (x *producerID) marshal(w *writer) {
	w.str(x.ConnectionID)
	w.i64(x.Value)
	w.i64(x.SessionID)
}
func (x *producerID) unmarshal(r *reader) {
	x.ConnectionID = r.optName()
	x.Value = r.i64()
	x.SessionID = r.i64()
}

// String is ProducerId.toString.
func (x *producerID) String() string {
	if x == nil {
		return ""
	}
	var buf [64]byte
	return string(x.appendText(buf[:0]))
}

// appendText appends String's text to b.
func (x *producerID) appendText(b []byte) []byte {
	b = append(b, x.ConnectionID...)
	b = append(b, ':')
	b = strconv.AppendInt(b, x.SessionID, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, x.Value, 10)
}

type brokerID struct{ Value string }

func (*brokerID) dsType() byte          { return typeBrokerID }
func (x *brokerID) marshal(w *writer)   { w.str(x.Value) }
func (x *brokerID) unmarshal(r *reader) { x.Value = r.optName() }

type messageID struct {
	TextView    string
	ProducerID  *producerID
	ProducerSeq int64
	BrokerSeq   int64
}

func (*messageID) dsType() byte { return typeMessageID }
func (x *messageID) marshal(w *writer) {
	w.str(x.TextView)
	w.nested(x.ProducerID)
	w.i64(x.ProducerSeq)
	w.i64(x.BrokerSeq)
}
func (x *messageID) unmarshal(r *reader) {
	x.TextView = r.str()
	x.ProducerID = nestedAs[*producerID](r, "producerId")
	x.ProducerSeq = r.i64()
	x.BrokerSeq = r.i64()
}

// String is MessageId.toString: "ID:…" from the text view, else
// producerId:sequence.
func (x *messageID) String() string {
	if x == nil {
		return ""
	}
	if x.TextView != "" {
		if len(x.TextView) >= 3 && x.TextView[:3] == "ID:" {
			return x.TextView
		}
		return "ID:" + x.TextView
	}
	// Every delivery's id is built here: one allocation, the string.
	var buf [96]byte
	return string(x.appendKey(buf[:0]))
}

// appendKey appends producerId:sequence, String's text without a text view.
func (x *messageID) appendKey(b []byte) []byte {
	if x.ProducerID != nil {
		b = x.ProducerID.appendText(b)
	}
	b = append(b, ':')
	return strconv.AppendInt(b, x.ProducerSeq, 10)
}

type localTxID struct {
	Value        int64
	ConnectionID *connectionID
}

func (*localTxID) dsType() byte { return typeLocalTransactionID }
func (x *localTxID) marshal(w *writer) {
	w.i64(x.Value)
	w.nested(x.ConnectionID)
}
func (x *localTxID) unmarshal(r *reader) {
	x.Value = r.i64()
	x.ConnectionID = nestedAs[*connectionID](r, "connectionId")
}

type xaTxID struct {
	FormatID int32
	Global   []byte
	Branch   []byte
}

func (*xaTxID) dsType() byte { return typeXATransactionID }
func (x *xaTxID) marshal(w *writer) {
	w.i32(x.FormatID)
	w.bytes(x.Global)
	w.bytes(x.Branch)
}
func (x *xaTxID) unmarshal(r *reader) {
	x.FormatID = r.i32()
	x.Global = r.bytes()
	x.Branch = r.bytes()
}

// dest is an ActiveMQDestination: its type code says queue, topic or
// temporary, and only the physical name travels.
type dest struct {
	Type byte
	Name string
}

func (x *dest) dsType() byte              { return x.Type }
func (x *dest) marshal(w *writer)         { w.str(x.Name) }
func (x *dest) unmarshal(r *reader)       { x.Name = r.optName() }
func (x *dest) equal(y *dest) bool        { return x != nil && y != nil && *x == *y }
func (x *dest) String() string            { return fmt.Sprintf("%d:%s", x.Type, x.Name) }
func (*networkBridgeFilter) dsType() byte { return typeNetworkBridgeFilter }

// networkBridgeFilter is the additionalPredicate of a native network consumer.
type networkBridgeFilter struct {
	NetworkBrokerID *brokerID
	MessageTTL      int32
	ConsumerTTL     int32
}

func (x *networkBridgeFilter) marshal(w *writer) {
	w.nested(x.NetworkBrokerID)
	w.i32(x.MessageTTL)
	w.i32(x.ConsumerTTL)
}
func (x *networkBridgeFilter) unmarshal(r *reader) {
	x.NetworkBrokerID = nestedAs[*brokerID](r, "networkBrokerId")
	x.MessageTTL = r.i32()
	x.ConsumerTTL = r.i32()
}

// --- commands ---

// wireFormatInfo is not a BaseCommand: magic, version, property map.
type wireFormatInfo struct {
	Magic   [8]byte
	Version int32
	Props   []byte
}

// magic opens every WireFormatInfo.
var magic = [8]byte{'A', 'c', 't', 'i', 'v', 'e', 'M', 'Q'}

func (*wireFormatInfo) dsType() byte { return typeWireFormatInfo }
func (x *wireFormatInfo) base() *baseCommand {
	return &baseCommand{}
}
func (x *wireFormatInfo) marshal(w *writer) {
	w.b = append(w.b, x.Magic[:]...)
	w.i32(x.Version)
	w.bytes(x.Props)
}
func (x *wireFormatInfo) unmarshal(r *reader) {
	copy(x.Magic[:], r.take(8))
	x.Version = r.i32()
	x.Props = r.bytes()
}

type brokerInfo struct {
	baseCommand
	BrokerID          *brokerID
	BrokerURL         string
	Peers             []*brokerInfo
	BrokerName        string
	SlaveBroker       bool
	MasterBroker      bool
	FaultTolerant     bool
	DuplexConnection  bool
	NetworkConnection bool
	ConnectionID      int64
	BrokerUploadURL   string
	NetworkProperties string
}

func (*brokerInfo) dsType() byte { return typeBrokerInfo }
func (x *brokerInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.BrokerID)
	w.str(x.BrokerURL)
	writeArray(w, x.Peers)
	w.str(x.BrokerName)
	w.bool(x.SlaveBroker)
	w.bool(x.MasterBroker)
	w.bool(x.FaultTolerant)
	w.bool(x.DuplexConnection)
	w.bool(x.NetworkConnection)
	w.i64(x.ConnectionID)
	w.str(x.BrokerUploadURL)
	w.str(x.NetworkProperties)
}
func (x *brokerInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.BrokerID = nestedAs[*brokerID](r, "brokerId")
	x.BrokerURL = r.str()
	x.Peers = readArray[*brokerInfo](r, "peerBrokerInfos")
	x.BrokerName = r.str()
	x.SlaveBroker = r.bool()
	x.MasterBroker = r.bool()
	x.FaultTolerant = r.bool()
	x.DuplexConnection = r.bool()
	x.NetworkConnection = r.bool()
	x.ConnectionID = r.i64()
	x.BrokerUploadURL = r.str()
	x.NetworkProperties = r.str()
}

type connectionInfo struct {
	baseCommand
	ConnectionID          *connectionID
	ClientID              string
	Password              string
	UserName              string
	BrokerPath            []*brokerID
	BrokerMasterConnector bool
	Manageable            bool
	ClientMaster          bool
	FaultTolerant         bool
	FailoverReconnect     bool
	ClientIP              string
}

func (*connectionInfo) dsType() byte { return typeConnectionInfo }
func (x *connectionInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ConnectionID)
	w.str(x.ClientID)
	w.str(x.Password)
	w.str(x.UserName)
	writeArray(w, x.BrokerPath)
	w.bool(x.BrokerMasterConnector)
	w.bool(x.Manageable)
	w.bool(x.ClientMaster)
	w.bool(x.FaultTolerant)
	w.bool(x.FailoverReconnect)
	w.str(x.ClientIP)
}
func (x *connectionInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ConnectionID = nestedAs[*connectionID](r, "connectionId")
	x.ClientID = r.str()
	x.Password = r.str()
	x.UserName = r.str()
	x.BrokerPath = readArray[*brokerID](r, "brokerPath")
	x.BrokerMasterConnector = r.bool()
	x.Manageable = r.bool()
	x.ClientMaster = r.bool()
	x.FaultTolerant = r.bool()
	x.FailoverReconnect = r.bool()
	x.ClientIP = r.str()
}

type sessionInfo struct {
	baseCommand
	SessionID *sessionID
}

func (*sessionInfo) dsType() byte { return typeSessionInfo }
func (x *sessionInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.SessionID)
}
func (x *sessionInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.SessionID = nestedAs[*sessionID](r, "sessionId")
}

type consumerInfo struct {
	baseCommand
	ConsumerID             *consumerID
	Browser                bool
	Destination            *dest
	PrefetchSize           int32
	MaxPendingMessageLimit int32
	DispatchAsync          bool
	Selector               string
	ClientID               string
	SubscriptionName       string
	NoLocal                bool
	Exclusive              bool
	Retroactive            bool
	Priority               int8
	BrokerPath             []*brokerID
	AdditionalPredicate    dataStructure
	NetworkSubscription    bool
	OptimizedAcknowledge   bool
	NoRangeAcks            bool
	NetworkConsumerPath    []*consumerID
}

func (*consumerInfo) dsType() byte { return typeConsumerInfo }
func (x *consumerInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ConsumerID)
	w.bool(x.Browser)
	w.nested(x.Destination)
	w.i32(x.PrefetchSize)
	w.i32(x.MaxPendingMessageLimit)
	w.bool(x.DispatchAsync)
	w.str(x.Selector)
	w.str(x.ClientID)
	w.str(x.SubscriptionName)
	w.bool(x.NoLocal)
	w.bool(x.Exclusive)
	w.bool(x.Retroactive)
	w.u8(byte(x.Priority))
	writeArray(w, x.BrokerPath)
	w.nested(x.AdditionalPredicate)
	w.bool(x.NetworkSubscription)
	w.bool(x.OptimizedAcknowledge)
	w.bool(x.NoRangeAcks)
	writeArray(w, x.NetworkConsumerPath)
}
func (x *consumerInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ConsumerID = nestedAs[*consumerID](r, "consumerId")
	x.Browser = r.bool()
	x.Destination = nestedAs[*dest](r, "destination")
	x.PrefetchSize = r.i32()
	x.MaxPendingMessageLimit = r.i32()
	x.DispatchAsync = r.bool()
	x.Selector = r.str()
	x.ClientID = r.str()
	x.SubscriptionName = r.str()
	x.NoLocal = r.bool()
	x.Exclusive = r.bool()
	x.Retroactive = r.bool()
	x.Priority = int8(r.u8())
	x.BrokerPath = readArray[*brokerID](r, "brokerPath")
	x.AdditionalPredicate = r.nested()
	x.NetworkSubscription = r.bool()
	x.OptimizedAcknowledge = r.bool()
	x.NoRangeAcks = r.bool()
	x.NetworkConsumerPath = readArray[*consumerID](r, "networkConsumerPath")
}

type producerInfo struct {
	baseCommand
	ProducerID    *producerID
	Destination   *dest
	BrokerPath    []*brokerID
	DispatchAsync bool
	WindowSize    int32
}

func (*producerInfo) dsType() byte { return typeProducerInfo }
func (x *producerInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ProducerID)
	w.nested(x.Destination)
	writeArray(w, x.BrokerPath)
	w.bool(x.DispatchAsync)
	w.i32(x.WindowSize)
}
func (x *producerInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ProducerID = nestedAs[*producerID](r, "producerId")
	x.Destination = nestedAs[*dest](r, "destination")
	x.BrokerPath = readArray[*brokerID](r, "brokerPath")
	x.DispatchAsync = r.bool()
	x.WindowSize = r.i32()
}

type transactionInfo struct {
	baseCommand
	ConnectionID  *connectionID
	TransactionID dataStructure // *localTxID or *xaTxID
	Type          byte
}

func (*transactionInfo) dsType() byte { return typeTransactionInfo }
func (x *transactionInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ConnectionID)
	w.nested(x.TransactionID)
	w.u8(x.Type)
}
func (x *transactionInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ConnectionID = nestedAs[*connectionID](r, "connectionId")
	x.TransactionID = r.nested()
	x.Type = r.u8()
}

type destinationInfo struct {
	baseCommand
	ConnectionID  *connectionID
	Destination   *dest
	OperationType byte
	Timeout       int64
	BrokerPath    []*brokerID
}

func (*destinationInfo) dsType() byte { return typeDestinationInfo }
func (x *destinationInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ConnectionID)
	w.nested(x.Destination)
	w.u8(x.OperationType)
	w.i64(x.Timeout)
	writeArray(w, x.BrokerPath)
}
func (x *destinationInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ConnectionID = nestedAs[*connectionID](r, "connectionId")
	x.Destination = nestedAs[*dest](r, "destination")
	x.OperationType = r.u8()
	x.Timeout = r.i64()
	x.BrokerPath = readArray[*brokerID](r, "brokerPath")
}

// removeSubscriptionInfo destroys a durable subscription. The Java field is
// spelt subcriptionName.
type removeSubscriptionInfo struct {
	baseCommand
	ConnectionID     *connectionID
	SubscriptionName string
	ClientID         string
}

func (*removeSubscriptionInfo) dsType() byte { return typeRemoveSubscriptionInfo }
func (x *removeSubscriptionInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ConnectionID)
	w.str(x.SubscriptionName)
	w.str(x.ClientID)
}
func (x *removeSubscriptionInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ConnectionID = nestedAs[*connectionID](r, "connectionId")
	x.SubscriptionName = r.str()
	x.ClientID = r.str()
}

type keepAliveInfo struct{ baseCommand }

func (*keepAliveInfo) dsType() byte          { return typeKeepAliveInfo }
func (x *keepAliveInfo) marshal(w *writer)   { x.marshalBase(w) }
func (x *keepAliveInfo) unmarshal(r *reader) { x.unmarshalBase(r) }

// connectionControl is ConnectionControl. The bridge sends an empty one
// asking for a response as a round trip that touches nothing (Conn.ping):
// ActiveMQ's TransportConnection only notes its faultTolerant flag (false,
// the default) and answers with a Response, written like every other answer.
type connectionControl struct {
	baseCommand
	Close, Exit, FaultTolerant, Resume, Suspend bool
	ConnectedBrokers, ReconnectTo               string
	RebalanceConnection                         bool
	Token                                       []byte
}

func (*connectionControl) dsType() byte { return typeConnectionControl }
func (x *connectionControl) marshal(w *writer) {
	x.marshalBase(w)
	w.bool(x.Close)
	w.bool(x.Exit)
	w.bool(x.FaultTolerant)
	w.bool(x.Resume)
	w.bool(x.Suspend)
	w.str(x.ConnectedBrokers)
	w.str(x.ReconnectTo)
	w.bool(x.RebalanceConnection)
	w.bytes(x.Token)
}
func (x *connectionControl) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.Close = r.bool()
	x.Exit = r.bool()
	x.FaultTolerant = r.bool()
	x.Resume = r.bool()
	x.Suspend = r.bool()
	x.ConnectedBrokers = r.str()
	x.ReconnectTo = r.str()
	x.RebalanceConnection = r.bool()
	x.Token = r.bytes()
}

type shutdownInfo struct{ baseCommand }

func (*shutdownInfo) dsType() byte          { return typeShutdownInfo }
func (x *shutdownInfo) marshal(w *writer)   { x.marshalBase(w) }
func (x *shutdownInfo) unmarshal(r *reader) { x.unmarshalBase(r) }

type removeInfo struct {
	baseCommand
	ObjectID                dataStructure // a connection, session, consumer or producer id
	LastDeliveredSequenceID int64
}

func (*removeInfo) dsType() byte { return typeRemoveInfo }
func (x *removeInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ObjectID)
	w.i64(x.LastDeliveredSequenceID)
}
func (x *removeInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ObjectID = r.nested()
	x.LastDeliveredSequenceID = r.i64()
}

type connectionError struct {
	baseCommand
	Exception    string
	ConnectionID *connectionID
}

func (*connectionError) dsType() byte { return typeConnectionError }
func (x *connectionError) marshal(w *writer) {
	x.marshalBase(w)
	writeThrowable(w, x.Exception)
	w.nested(x.ConnectionID)
}
func (x *connectionError) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.Exception = r.throwable(false)
	x.ConnectionID = nestedAs[*connectionID](r, "connectionId")
}

// writeThrowable writes "class: message" as a throwable without stack trace.
func writeThrowable(w *writer, s string) {
	w.bool(s != "")
	if s == "" {
		return
	}
	class, msg := s, ""
	for i := 0; i+1 < len(s); i++ {
		if s[i] == ':' && s[i+1] == ' ' {
			class, msg = s[:i], s[i+2:]
			break
		}
	}
	w.str(class)
	w.str(msg)
}

type messageDispatch struct {
	baseCommand
	ConsumerID        *consumerID
	Destination       *dest
	Message           *message
	RedeliveryCounter int32
}

func (*messageDispatch) dsType() byte { return typeMessageDispatch }
func (x *messageDispatch) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ConsumerID)
	w.nested(x.Destination)
	w.nested(x.Message)
	w.i32(x.RedeliveryCounter)
}
func (x *messageDispatch) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ConsumerID = nestedAs[*consumerID](r, "consumerId")
	x.Destination = nestedAs[*dest](r, "destination")
	x.Message = nestedAs[*message](r, "message")
	x.RedeliveryCounter = r.i32()
}

type messageAck struct {
	baseCommand
	Destination   *dest
	TransactionID dataStructure
	ConsumerID    *consumerID
	AckType       byte
	FirstID       *messageID
	LastID        *messageID
	MessageCount  int32
	PoisonCause   string
}

func (*messageAck) dsType() byte { return typeMessageAck }
func (x *messageAck) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.Destination)
	w.nested(x.TransactionID)
	w.nested(x.ConsumerID)
	w.u8(x.AckType)
	w.nested(x.FirstID)
	w.nested(x.LastID)
	w.i32(x.MessageCount)
	writeThrowable(w, x.PoisonCause)
}
func (x *messageAck) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.Destination = nestedAs[*dest](r, "destination")
	x.TransactionID = r.nested()
	x.ConsumerID = nestedAs[*consumerID](r, "consumerId")
	x.AckType = r.u8()
	x.FirstID = nestedAs[*messageID](r, "firstMessageId")
	x.LastID = nestedAs[*messageID](r, "lastMessageId")
	x.MessageCount = r.i32()
	x.PoisonCause = r.throwable(false)
}

// message is every ActiveMQ*Message; Type tells which (its body encoding).
type message struct {
	baseCommand
	Type                  byte
	ProducerID            *producerID
	Destination           *dest
	TransactionID         dataStructure
	OriginalDestination   *dest
	MessageID             *messageID
	OriginalTransactionID dataStructure
	GroupID               string
	GroupSequence         int32
	CorrelationID         string
	Persistent            bool
	Expiration            int64
	Priority              byte
	ReplyTo               *dest
	Timestamp             int64
	JMSType               string
	Content               []byte
	Props                 []byte // the marshalled primitive map, passed through unchanged
	DataStructure         dataStructure
	TargetConsumerID      *consumerID
	Compressed            bool
	RedeliveryCounter     int32
	BrokerPath            []*brokerID
	Arrival               int64
	UserID                string
	ReceivedByDFBridge    bool
	Droppable             bool
	Cluster               []*brokerID
	BrokerInTime          int64
	BrokerOutTime         int64
	JMSXGroupFirst        bool
}

func (x *message) dsType() byte { return x.Type }
func (x *message) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.ProducerID)
	w.nested(x.Destination)
	w.nested(x.TransactionID)
	w.nested(x.OriginalDestination)
	w.nested(x.MessageID)
	w.nested(x.OriginalTransactionID)
	w.str(x.GroupID)
	w.i32(x.GroupSequence)
	w.str(x.CorrelationID)
	w.bool(x.Persistent)
	w.i64(x.Expiration)
	w.u8(x.Priority)
	w.nested(x.ReplyTo)
	w.i64(x.Timestamp)
	w.str(x.JMSType)
	w.bytes(x.Content)
	w.bytes(x.Props)
	w.nested(x.DataStructure)
	w.nested(x.TargetConsumerID)
	w.bool(x.Compressed)
	w.i32(x.RedeliveryCounter)
	writeArray(w, x.BrokerPath)
	w.i64(x.Arrival)
	w.str(x.UserID)
	w.bool(x.ReceivedByDFBridge)
	w.bool(x.Droppable)
	writeArray(w, x.Cluster)
	w.i64(x.BrokerInTime)
	w.i64(x.BrokerOutTime)
	w.bool(x.JMSXGroupFirst)
}
func (x *message) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.ProducerID = nestedAs[*producerID](r, "producerId")
	x.Destination = nestedAs[*dest](r, "destination")
	x.TransactionID = r.nested()
	x.OriginalDestination = nestedAs[*dest](r, "originalDestination")
	x.MessageID = nestedAs[*messageID](r, "messageId")
	x.OriginalTransactionID = r.nested()
	x.GroupID = r.str()
	x.GroupSequence = r.i32()
	x.CorrelationID = r.str()
	x.Persistent = r.bool()
	x.Expiration = r.i64()
	x.Priority = r.u8()
	x.ReplyTo = nestedAs[*dest](r, "replyTo")
	x.Timestamp = r.i64()
	x.JMSType = r.str()
	x.Content = r.bytes()
	x.Props = r.bytes()
	x.DataStructure = r.nested()
	x.TargetConsumerID = nestedAs[*consumerID](r, "targetConsumerId")
	x.Compressed = r.bool()
	x.RedeliveryCounter = r.i32()
	x.BrokerPath = readArray[*brokerID](r, "brokerPath")
	x.Arrival = r.i64()
	x.UserID = r.str()
	x.ReceivedByDFBridge = r.bool()
	x.Droppable = r.bool()
	x.Cluster = readArray[*brokerID](r, "cluster")
	x.BrokerInTime = r.i64()
	x.BrokerOutTime = r.i64()
	x.JMSXGroupFirst = r.bool()
}

type response struct {
	baseCommand
	CorrelationID int32
}

func (*response) dsType() byte { return typeResponse }
func (x *response) marshal(w *writer) {
	x.marshalBase(w)
	w.i32(x.CorrelationID)
}
func (x *response) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.CorrelationID = r.i32()
}

type exceptionResponse struct {
	response
	Exception string
}

func (*exceptionResponse) dsType() byte { return typeExceptionResponse }
func (x *exceptionResponse) marshal(w *writer) {
	x.response.marshal(w)
	writeThrowable(w, x.Exception)
}
func (x *exceptionResponse) unmarshal(r *reader) {
	x.response.unmarshal(r)
	x.Exception = r.throwable(r.stackTraces())
}

type dataResponse struct {
	response
	Data dataStructure
}

func (*dataResponse) dsType() byte { return typeDataResponse }
func (x *dataResponse) marshal(w *writer) {
	x.response.marshal(w)
	w.nested(x.Data)
}
func (x *dataResponse) unmarshal(r *reader) {
	x.response.unmarshal(r)
	x.Data = r.nested()
}

type integerResponse struct {
	response
	Result int32
}

func (*integerResponse) dsType() byte { return typeIntegerResponse }
func (x *integerResponse) marshal(w *writer) {
	x.response.marshal(w)
	w.i32(x.Result)
}
func (x *integerResponse) unmarshal(r *reader) {
	x.response.unmarshal(r)
	x.Result = r.i32()
}

// correlation returns the correlation id of any response command.
func correlation(c command) (int32, bool) {
	switch x := c.(type) {
	case *response:
		return x.CorrelationID, true
	case *exceptionResponse:
		return x.CorrelationID, true
	case *dataResponse:
		return x.CorrelationID, true
	case *integerResponse:
		return x.CorrelationID, true
	}
	return 0, false
}
