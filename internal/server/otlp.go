package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"haystack/internal/attrs"
)

// OTLP logs ingest: POST /otlp/v1/logs, as the OpenTelemetry Collector's
// otlphttp exporter and Grafana Alloy's otelcol.exporter.otlphttp send it
// to Loki (endpoint http://host/otlp; they append /v1/logs).
//
// The body is an ExportLogsServiceRequest, binary protobuf
// (Content-Type application/x-protobuf) or OTLP/JSON (application/json:
// lowerCamelCase keys, 64-bit integers as strings or numbers), with
// Content-Encoding gzip or none (readBody: deflate and snappy too). The
// protobuf is decoded by hand, with field numbers from the public
// opentelemetry-proto definitions (no generated code):
//
//	ExportLogsServiceRequest { repeated ResourceLogs resource_logs = 1; }
//	ResourceLogs   { Resource resource = 1; repeated ScopeLogs scope_logs = 2; }
//	Resource       { repeated KeyValue attributes = 1; }
//	ScopeLogs      { InstrumentationScope scope = 1; repeated LogRecord log_records = 2; }
//	InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3;
//	                 uint32 dropped_attributes_count = 4; }
//	LogRecord      { fixed64 time_unix_nano = 1; fixed64 observed_time_unix_nano = 11;
//	                 SeverityNumber severity_number = 2; string severity_text = 3; AnyValue body = 5;
//	                 repeated KeyValue attributes = 6; uint32 dropped_attributes_count = 7;
//	                 fixed32 flags = 8; bytes trace_id = 9; bytes span_id = 10; string event_name = 12; }
//	KeyValue       { string key = 1; AnyValue value = 2; }
//	AnyValue       { oneof { string string_value = 1; bool bool_value = 2; int64 int_value = 3;
//	                 double double_value = 4; ArrayValue array_value = 5;
//	                 KeyValueList kvlist_value = 6; bytes bytes_value = 7; } }
//	ArrayValue     { repeated AnyValue values = 1; }
//	KeyValueList   { repeated KeyValue values = 1; }
//
// Unknown fields are skipped (and unknown JSON keys ignored), as OTLP
// requires of receivers.
//
// Records map to entries as Loki documents its OTLP ingestion
// (grafana/loki docs/sources/send-data/otel/_index.md, "Format
// considerations", and docs/sources/get-started/labels/_index.md,
// "Default labels for OpenTelemetry"):
//
//   - Stream labels: the resource attributes of otlpIndexAttributes, with
//     every character other than [A-Za-z0-9_] replaced by '_'
//     (service.name → service_name); a map value is flattened into one
//     label a key, joined by '_'; other non-string values are rendered as
//     the collector's AsString renders them. Without service.name (or
//     with it empty) the stream gets service_name="unknown_service", as
//     Loki names a stream it finds no service for.
//   - Everything else is the entry's structured metadata (otlp_attrs.go,
//     as Loki's OTLP ingestion: its pkg/loghttp/push/otlplabels): the
//     other resource attributes, the scope's attributes, scope_name,
//     scope_version and scope_dropped_attributes_count, the record's
//     attributes, severity_number, severity_text, dropped_attributes_count,
//     flags, trace_id and span_id (lower-case hex), event_name, and
//     observed_timestamp (Unix ns; only when the record has both times).
//     Attribute names are normalized as Loki's (metaName: service.version
//     → service_version), a map value is flattened into one pair a key
//     (names joined by '_'), other values rendered as the body is (String).
//   - Line: the body; a string as it is, other values as the collector's
//     AsString renders them (Loki's docs name that method): JSON for maps
//     and arrays, base64 for bytes, decimal for numbers.
//   - Time: time_unix_nano, or observed_time_unix_nano when that is 0, or
//     the time of arrival when both are.
//
// The entries then go through the same limits as a Loki push (validate).
// The answer follows OTLP/HTTP (opentelemetry-proto docs/specification.md,
// "OTLP/HTTP Response"), in the request's encoding: 200 with an empty
// ExportLogsServiceResponse; 200 with partial_success (rejected_log_records
// and an error_message) when some records were refused and others stored;
// 400 with a google.rpc.Status when the body is malformed or every record
// was refused; 413 for a body over the limits; 415 for another
// Content-Type.

// otlpIndexAttributes are the resource attributes Loki stores as stream
// labels by default (its docs list them). deployment.environment.name is
// the newer semantic-conventions name of deployment.environment; Loki's
// docs name one or the other depending on the version, so both are kept.
var otlpIndexAttributes = map[string]bool{
	"cloud.availability_zone":     true,
	"cloud.region":                true,
	"container.name":              true,
	"deployment.environment":      true,
	"deployment.environment.name": true,
	"k8s.cluster.name":            true,
	"k8s.container.name":          true,
	"k8s.cronjob.name":            true,
	"k8s.daemonset.name":          true,
	"k8s.deployment.name":         true,
	"k8s.job.name":                true,
	"k8s.namespace.name":          true,
	"k8s.pod.name":                true,
	"k8s.replicaset.name":         true,
	"k8s.statefulset.name":        true,
	"service.instance.id":         true,
	"service.name":                true,
	"service.namespace":           true,
}

// otlpMaxDepth bounds the nesting of AnyValue arrays and maps. A protobuf
// body of nested 2-byte headers would otherwise recurse once per 2 bytes
// (millions of frames for a body within the limits).
const otlpMaxDepth = 128

// otlpValue is a decoded AnyValue.
//
// An array or a map decoded from a request is not decoded into values
// (enc is set): bytes holds its protobuf ArrayValue or KeyValueList
// message, or the JSON text of its "values" array, checked by the
// decoder; eachElem and eachKV decode its values one at a time. An empty
// AnyValue is 2 bytes of protobuf or 3 of JSON and a decoded tree of
// them cost ~100 bytes each before any limit applied: a 64 MiB push took
// gigabytes (review 9, F1). Built by tests, arr and kvs hold the values.
type otlpValue struct {
	kind  otlpKind
	enc   otlpEnc
	num   int64   // int, bool (0 or 1)
	dbl   float64 // double
	bytes []byte  // bytes, and string (decoded from protobuf: aliasing the body, so a line is not copied)
	arr   []otlpValue
	kvs   []otlpKV
}

// otlpEnc is how an array or a map holds its values.
type otlpEnc uint8

const (
	otlpDecoded  otlpEnc = iota // in arr or kvs
	otlpWire                    // bytes: the protobuf message
	otlpJSONText                // bytes: the JSON array of "values" (or null, or empty: none)
)

type otlpKind uint8

const (
	otlpEmpty otlpKind = iota
	otlpString
	otlpBool
	otlpInt
	otlpDouble
	otlpBytes
	otlpArray
	otlpMap
	// otlpTooLarge is an attribute whose arrays and maps hold more than
	// otlpAttrMaxValues values: it renders to more than attrs.MaxBytes
	// (each value at least a byte), so its record is refused, and it was
	// not kept (a 2-byte empty AnyValue decodes to a 96-byte otlpValue).
	otlpTooLarge
)

// otlpAttrMaxValues bounds the values decoded inside one attribute's
// arrays and maps (see otlpTooLarge).
const otlpAttrMaxValues = attrs.MaxBytes

type otlpKV struct {
	key string
	val otlpValue
}

// otlpAttrs is the attributes (KeyValues) of a resource, scope or
// record. Decoded from protobuf they are not decoded into otlpKVs (~110
// bytes each, for an empty KeyValue's 2 bytes: a record of a million
// attributes cost 320x its size): raws holds the messages whose fields
// numbered field are the attributes, checked by the decoder, and each
// decodes them one at a time. Decoded from JSON (or built by tests), kvs
// holds them.
type otlpAttrs struct {
	kvs   []otlpKV
	raws  [][]byte
	field int
	json  []byte // from JSON: the array of KeyValues, checked
}

// add notes that message m (of the list's field numbers) holds
// attributes, once.
func (a *otlpAttrs) add(m []byte, field int) {
	if n := len(a.raws); n > 0 && len(a.raws[n-1]) == len(m) && &a.raws[n-1][0] == &m[0] {
		return
	}
	a.field = field
	a.raws = append(a.raws, m)
}

// each calls fn with each attribute in order, until fn returns false. An
// attribute whose arrays and maps hold more than otlpAttrMaxValues
// values is otlpTooLarge.
func (a *otlpAttrs) each(fn func(key string, val otlpValue) bool) {
	for _, kv := range a.kvs {
		if !fn(kv.key, kv.val) {
			return
		}
	}
	if a.json != nil {
		jsonElems(a.json, func(_ int, el []byte) error {
			key, val, _ := jsonKVElem(el)
			budget := otlpAttrMaxValues
			jsonCharge(val, &budget)
			if budget < 0 {
				val = otlpValue{kind: otlpTooLarge}
			}
			if !fn(string(key), val) {
				return errJSONStop
			}
			return nil
		})
	}
	for _, raw := range a.raws {
		for b := raw; len(b) > 0; {
			f, t, _, v, rest, err := protoField(b)
			if err != nil {
				break // not after the decoder's check
			}
			b = rest
			if f != a.field || t != wireLen {
				continue
			}
			key, val := otlpShallowKV(v)
			budget := otlpAttrMaxValues
			for kb := v; len(kb) > 0 && budget >= 0; {
				kf, kt, _, kv, krest, err := protoField(kb)
				if err != nil {
					break
				}
				kb = krest
				if kf == 2 && kt == wireLen {
					otlpCharge(kv, &budget)
				}
			}
			if budget < 0 {
				val = otlpValue{kind: otlpTooLarge}
			}
			if !fn(string(key), val) {
				return
			}
		}
	}
}

// list is the attributes as otlpKVs (for tests).
func (a *otlpAttrs) list() []otlpKV {
	var out []otlpKV
	a.each(func(k string, v otlpValue) bool {
		out = append(out, otlpKV{k, v})
		return true
	})
	return out
}

// jsonCharge takes from *budget what decode took for v (decoded from
// JSON): one for each value inside its arrays and maps. It stops once
// *budget is below zero.
func jsonCharge(v otlpValue, budget *int) {
	if v.enc != otlpJSONText {
		return
	}
	jsonElems(v.bytes, func(_ int, el []byte) error {
		if *budget--; *budget < 0 {
			return errJSONStop
		}
		var e otlpValue
		if v.kind == otlpArray {
			e = jsonAnyElem(el)
		} else {
			_, e, _ = jsonKVElem(el)
		}
		jsonCharge(e, budget)
		if *budget < 0 {
			return errJSONStop
		}
		return nil
	})
}

// otlpCharge takes from *budget what decodeOTLPValue took for the
// (checked) AnyValue b: one for each value inside its arrays and maps,
// every array or map field of it counted, as decodeOTLPValue checks
// each. It stops once *budget is below zero.
func otlpCharge(b []byte, budget *int) {
	for len(b) > 0 && *budget >= 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return
		}
		b = rest
		if f != 5 && f != 6 || t != wireLen {
			continue
		}
		for len(v) > 0 && *budget >= 0 {
			ef, et, _, ev, rest, err := protoField(v)
			if err != nil {
				return
			}
			v = rest
			if ef != 1 || et != wireLen {
				continue
			}
			*budget--
			if f == 5 {
				otlpCharge(ev, budget)
				continue
			}
			for kb := ev; len(kb) > 0; {
				kf, kt, _, kv, krest, err := protoField(kb)
				if err != nil {
					break
				}
				kb = krest
				if kf == 2 && kt == wireLen {
					otlpCharge(kv, budget)
				}
			}
		}
	}
}

// otlpResource is one ResourceLogs: its attributes and scopes.
type otlpResource struct {
	attrs  otlpAttrs
	scopes []otlpScope
}

// nrecords counts the records of all the resource's scopes.
func (r *otlpResource) nrecords() int {
	n := 0
	for _, sc := range r.scopes {
		n += len(sc.records)
	}
	return n
}

// otlpScope is one ScopeLogs: its InstrumentationScope and records.
type otlpScope struct {
	name, version []byte
	attrs         otlpAttrs
	nattrs        int // attributes, for messages
	dropped       uint64
	records       []otlpRecord
}

type otlpRecord struct {
	time, observed  uint64
	body            otlpValue
	sevNum          int64 // severity_number (an enum: int32)
	sevText         []byte
	attrs           otlpAttrs
	dropped, flags  uint64 // uint32 fields
	traceID, spanID []byte // 16 and 8 bytes, or none
	eventName       []byte
}

// ---- protobuf ----

// decodeOTLPProto decodes a binary ExportLogsServiceRequest.
func decodeOTLPProto(b []byte) ([]otlpResource, error) {
	var out []otlpResource
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return nil, err
		}
		b = rest
		if f != 1 {
			continue
		}
		if t != wireLen {
			return nil, fmt.Errorf("resource_logs %d: wrong wire type %d", len(out), t)
		}
		res, err := decodeOTLPResourceLogs(v)
		if err != nil {
			return nil, fmt.Errorf("resource_logs %d: %w", len(out), err)
		}
		out = append(out, res)
	}
	return out, nil
}

func decodeOTLPResourceLogs(b []byte) (otlpResource, error) {
	var res otlpResource
	nattrs := 0
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return res, err
		}
		b = rest
		switch {
		case f == 1 && t == wireLen: // Resource
			if len(v) > 0 {
				res.attrs.add(v, 1)
			}
			for len(v) > 0 {
				f, t, _, kv, rest, err := protoField(v)
				if err != nil {
					return res, fmt.Errorf("resource: %w", err)
				}
				v = rest
				if f != 1 {
					continue
				}
				if t != wireLen {
					return res, fmt.Errorf("resource attribute %d: wrong wire type %d", nattrs, t)
				}
				if err := checkOTLPAttr(kv); err != nil {
					return res, fmt.Errorf("resource attribute %d: %w", nattrs, err)
				}
				nattrs++
			}
		case f == 2 && t == wireLen: // ScopeLogs
			// Sized by a first pass: grown by append, the records
			// (~200 bytes each) were copied again and again.
			sc := otlpScope{records: make([]otlpRecord, 0, countProtoField(v, 2))}
			for len(v) > 0 {
				f, t, _, rv, rest, err := protoField(v)
				if err != nil {
					return res, fmt.Errorf("scope_logs: %w", err)
				}
				v = rest
				switch {
				case f == 1 && t == wireLen:
					if err := decodeOTLPScope(rv, &sc); err != nil {
						return res, fmt.Errorf("scope: %w", err)
					}
				case f == 2 && t == wireLen:
					rec, err := decodeOTLPRecord(rv)
					if err != nil {
						return res, fmt.Errorf("log record %d: %w", res.nrecords()+len(sc.records), err)
					}
					sc.records = append(sc.records, rec)
				case f == 2:
					return res, fmt.Errorf("log record %d: wrong wire type %d", res.nrecords()+len(sc.records), t)
				case f == 1:
					return res, fmt.Errorf("scope: wrong wire type %d", t)
				}
			}
			res.scopes = append(res.scopes, sc)
		case f == 1 || f == 2:
			return res, fmt.Errorf("field %d: wrong wire type %d", f, t)
		}
	}
	return res, nil
}

// decodeOTLPScope decodes an InstrumentationScope into sc.
func decodeOTLPScope(b []byte, sc *otlpScope) error {
	all := b // the message: its attributes are read from it (otlpAttrs)
	for len(b) > 0 {
		f, t, num, v, rest, err := protoField(b)
		if err != nil {
			return err
		}
		b = rest
		switch {
		case f == 1 && t == wireLen:
			sc.name = v
		case f == 2 && t == wireLen:
			sc.version = v
		case f == 3 && t == wireLen:
			if err := checkOTLPAttr(v); err != nil {
				return fmt.Errorf("attribute %d: %w", sc.nattrs, err)
			}
			sc.nattrs++
			sc.attrs.add(all, 3)
		case f == 4 && t == wireVarint:
			sc.dropped = uint64(uint32(num)) // a uint32: protobuf keeps the low bits
		case f >= 1 && f <= 4:
			return fmt.Errorf("field %d: wrong wire type %d", f, t)
		}
	}
	return nil
}

func decodeOTLPRecord(b []byte) (otlpRecord, error) {
	var rec otlpRecord
	all, nattrs := b, 0 // the message: its attributes are read from it (otlpAttrs)
	for len(b) > 0 {
		f, t, num, v, rest, err := protoField(b)
		if err != nil {
			return rec, err
		}
		b = rest
		switch {
		case f == 1 && t == wireI64:
			rec.time = num
		case f == 11 && t == wireI64:
			rec.observed = num
		case f == 5 && t == wireLen:
			if rec.body, err = decodeOTLPValue(v, 0, nil); err != nil {
				return rec, fmt.Errorf("body: %w", err)
			}
		case f == 2 && t == wireVarint:
			rec.sevNum = int64(int32(num)) // an enum is an int32
		case f == 3 && t == wireLen:
			rec.sevText = v
		case f == 6 && t == wireLen:
			if err := checkOTLPAttr(v); err != nil {
				return rec, fmt.Errorf("attribute %d: %w", nattrs, err)
			}
			nattrs++
			rec.attrs.add(all, 6)
		case f == 7 && t == wireVarint:
			rec.dropped = uint64(uint32(num))
		case f == 8 && t == wireI32:
			rec.flags = num
		case f == 9 && t == wireLen:
			if len(v) != 0 && len(v) != 16 {
				return rec, fmt.Errorf("trace_id of %d bytes, want 16", len(v))
			}
			rec.traceID = v
		case f == 10 && t == wireLen:
			if len(v) != 0 && len(v) != 8 {
				return rec, fmt.Errorf("span_id of %d bytes, want 8", len(v))
			}
			rec.spanID = v
		case f == 12 && t == wireLen:
			rec.eventName = v
		case f >= 1 && f <= 3 || f >= 5 && f <= 12:
			return rec, fmt.Errorf("field %d: wrong wire type %d", f, t)
		}
	}
	return rec, nil
}

// checkOTLPAttr checks an attribute (a KeyValue of a resource, scope or
// record); otlpAttrs.each decodes it.
func checkOTLPAttr(b []byte) error {
	_, _, err := scanOTLPKeyValue(b, 0, nil)
	return err
}

// scanOTLPKeyValue checks and decodes a KeyValue; its key aliases b.
// Each value inside arrays and maps takes one from *budget (nil: no
// bound).
func scanOTLPKeyValue(b []byte, depth int, budget *int) (key []byte, val otlpValue, err error) {
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return key, val, err
		}
		b = rest
		switch {
		case f == 1 && t == wireLen:
			key = v
		case f == 2 && t == wireLen:
			if val, err = decodeOTLPValue(v, depth, budget); err != nil {
				return key, val, fmt.Errorf("%q: %w", key, err)
			}
		case f == 1 || f == 2:
			return key, val, fmt.Errorf("field %d: wrong wire type %d", f, t)
		}
	}
	return key, val, nil
}

// otlpField is the AnyValue that field f (wire type t) of an AnyValue
// message makes, or false when it is not one of its fields. An array or
// a map is kept as its message (otlpWire).
func otlpField(f, t int, num uint64, v []byte) (otlpValue, bool) {
	switch {
	case f == 1 && t == wireLen:
		return otlpValue{kind: otlpString, bytes: v}, true
	case f == 2 && t == wireVarint:
		val := otlpValue{kind: otlpBool}
		if num != 0 {
			val.num = 1
		}
		return val, true
	case f == 3 && t == wireVarint:
		return otlpValue{kind: otlpInt, num: int64(num)}, true
	case f == 4 && t == wireI64:
		return otlpValue{kind: otlpDouble, dbl: math.Float64frombits(num)}, true
	case f == 5 && t == wireLen:
		return otlpValue{kind: otlpArray, enc: otlpWire, bytes: v}, true
	case f == 6 && t == wireLen:
		return otlpValue{kind: otlpMap, enc: otlpWire, bytes: v}, true
	case f == 7 && t == wireLen:
		return otlpValue{kind: otlpBytes, bytes: v}, true
	}
	return otlpValue{}, false
}

// decodeOTLPValue checks and decodes an AnyValue; of several oneof
// fields the last wins, as protobuf decoders do. String and bytes values
// alias b, and so does an array or a map: its values are checked here
// (each takes one from *budget, nil: no bound) but not kept (see
// otlpValue), so that decoding allocates nothing whatever their number.
func decodeOTLPValue(b []byte, depth int, budget *int) (otlpValue, error) {
	var val otlpValue
	if depth >= otlpMaxDepth {
		return val, fmt.Errorf("values nested deeper than %d", otlpMaxDepth)
	}
	for len(b) > 0 {
		f, t, num, v, rest, err := protoField(b)
		if err != nil {
			return val, err
		}
		b = rest
		nv, ok := otlpField(f, t, num, v)
		if !ok {
			if f >= 1 && f <= 7 {
				return val, fmt.Errorf("field %d: wrong wire type %d", f, t)
			}
			continue
		}
		if nv.enc == otlpWire {
			for i := 0; len(v) > 0; {
				ef, et, _, ev, rest, err := protoField(v)
				if err != nil {
					return val, err
				}
				v = rest
				if ef != 1 {
					continue
				}
				if et != wireLen {
					return val, fmt.Errorf("value %d: wrong wire type %d", i, et)
				}
				if budget != nil {
					*budget--
				}
				if nv.kind == otlpArray {
					_, err = decodeOTLPValue(ev, depth+1, budget)
				} else {
					_, _, err = scanOTLPKeyValue(ev, depth+1, budget)
				}
				if err != nil {
					return val, fmt.Errorf("value %d: %w", i, err)
				}
				i++
			}
		}
		val = nv
	}
	return val, nil
}

// otlpShallow decodes an AnyValue that decodeOTLPValue has checked, as
// it did (an array or a map kept as its message).
func otlpShallow(b []byte) otlpValue {
	var val otlpValue
	for len(b) > 0 {
		f, t, num, v, rest, err := protoField(b)
		if err != nil {
			break // not after decodeOTLPValue's check
		}
		b = rest
		if nv, ok := otlpField(f, t, num, v); ok {
			val = nv
		}
	}
	return val
}

// otlpShallowKV decodes a KeyValue that decodeOTLPValue has checked.
func otlpShallowKV(b []byte) (key []byte, val otlpValue) {
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			break
		}
		b = rest
		switch {
		case f == 1 && t == wireLen:
			key = v
		case f == 2 && t == wireLen:
			val = otlpShallow(v)
		}
	}
	return key, val
}

// otlpKVKey is the key of a checked KeyValue.
func otlpKVKey(b []byte) []byte {
	var key []byte
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			break
		}
		b = rest
		if f == 1 && t == wireLen {
			key = v
		}
	}
	return key
}

// eachElem calls fn with each value of array v in order, until fn
// returns false.
func (v otlpValue) eachElem(fn func(e otlpValue) bool) {
	switch v.enc {
	case otlpDecoded:
		for _, e := range v.arr {
			if !fn(e) {
				return
			}
		}
		return
	case otlpJSONText:
		jsonElems(v.bytes, func(_ int, el []byte) error {
			if !fn(jsonAnyElem(el)) {
				return errJSONStop
			}
			return nil
		})
		return
	}
	for b := v.bytes; len(b) > 0; {
		f, t, _, ev, rest, err := protoField(b)
		if err != nil {
			return
		}
		b = rest
		if f == 1 && t == wireLen && !fn(otlpShallow(ev)) {
			return
		}
	}
}

// eachKV calls fn with each key and value of map v in order (a repeated
// key as often as it is given), until fn returns false.
func (v otlpValue) eachKV(fn func(key string, val otlpValue) bool) {
	switch v.enc {
	case otlpDecoded:
		for _, kv := range v.kvs {
			if !fn(kv.key, kv.val) {
				return
			}
		}
		return
	case otlpJSONText:
		jsonElems(v.bytes, func(_ int, el []byte) error {
			key, val, _ := jsonKVElem(el)
			if !fn(string(key), val) {
				return errJSONStop
			}
			return nil
		})
		return
	}
	for b := v.bytes; len(b) > 0; {
		f, t, _, ev, rest, err := protoField(b)
		if err != nil {
			return
		}
		b = rest
		if f == 1 && t == wireLen {
			key, val := otlpShallowKV(ev)
			if !fn(string(key), val) {
				return
			}
		}
	}
}

// ---- JSON ----

// Field names are OTLP/JSON's lowerCamelCase; encoding/json also matches
// them case-insensitively, and ignores unknown keys as OTLP requires.
type otlpJSONRequest struct {
	ResourceLogs []struct {
		Resource struct {
			Attributes json.RawMessage `json:"attributes"`
		} `json:"resource"`
		ScopeLogs []struct {
			Scope struct {
				Name                   string          `json:"name"`
				Version                string          `json:"version"`
				Attributes             json.RawMessage `json:"attributes"`
				DroppedAttributesCount otlpJSONUint    `json:"droppedAttributesCount"`
			} `json:"scope"`
			LogRecords []struct {
				TimeUnixNano           otlpJSONUint     `json:"timeUnixNano"`
				ObservedTimeUnixNano   otlpJSONUint     `json:"observedTimeUnixNano"`
				SeverityNumber         otlpJSONSeverity `json:"severityNumber"`
				SeverityText           string           `json:"severityText"`
				Body                   *otlpJSONAny     `json:"body"`
				Attributes             json.RawMessage  `json:"attributes"`
				DroppedAttributesCount otlpJSONUint     `json:"droppedAttributesCount"`
				Flags                  otlpJSONUint     `json:"flags"`
				TraceID                string           `json:"traceId"`
				SpanID                 string           `json:"spanId"`
				EventName              string           `json:"eventName"`
			} `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

type otlpJSONKV struct {
	Key   string       `json:"key"`
	Value *otlpJSONAny `json:"value"`
}

type otlpJSONAny struct {
	StringValue *string        `json:"stringValue"`
	BoolValue   *bool          `json:"boolValue"`
	IntValue    *otlpJSONInt   `json:"intValue"`
	DoubleValue *otlpJSONFloat `json:"doubleValue"`
	BytesValue  *otlpJSONBytes `json:"bytesValue"`
	ArrayValue  *otlpJSONList  `json:"arrayValue"`
	KvlistValue *otlpJSONList  `json:"kvlistValue"`
}

// otlpJSONList is an ArrayValue (values: AnyValues) or a KeyValueList
// (values: KeyValues). Its values are kept as JSON text and decoded one
// at a time (see otlpValue): decoded into structs, 3 bytes of "{}," cost
// ~300 bytes of allocations.
type otlpJSONList struct {
	Values json.RawMessage `json:"values"`
}

// otlpJSONUint is a uint64 sent as a string (the proto3 JSON form of
// 64-bit integers) or as a number, which decoders accept too.
type otlpJSONUint uint64

func (u *otlpJSONUint) UnmarshalJSON(b []byte) error {
	s, ok := jsonNumberText(b)
	if !ok {
		return nil // null
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		// An exponent form of an integer (1.7e18) is still an integer.
		if ferr != nil || f < 0 || f >= 1<<64 || f != math.Trunc(f) {
			return fmt.Errorf("%s is not an unsigned 64-bit integer", b)
		}
		v = uint64(f)
	}
	*u = otlpJSONUint(v)
	return nil
}

type otlpJSONInt int64

func (n *otlpJSONInt) UnmarshalJSON(b []byte) error {
	s, ok := jsonNumberText(b)
	if !ok {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f < -(1<<63) || f >= 1<<63 || f != math.Trunc(f) {
			return fmt.Errorf("%s is not a 64-bit integer", b)
		}
		v = int64(f)
	}
	*n = otlpJSONInt(v)
	return nil
}

// otlpJSONFloat is a double: a number, or a string of one or of "NaN",
// "Infinity", "-Infinity" (proto3 JSON).
type otlpJSONFloat float64

func (d *otlpJSONFloat) UnmarshalJSON(b []byte) error {
	s, ok := jsonNumberText(b)
	if !ok {
		return nil
	}
	var v float64
	switch s {
	case "NaN":
		v = math.NaN()
	case "Infinity":
		v = math.Inf(1)
	case "-Infinity":
		v = math.Inf(-1)
	default:
		var err error
		if v, err = strconv.ParseFloat(s, 64); err != nil || s == "" || strings.ContainsAny(s, "nNiI") {
			return fmt.Errorf("%s is not a double", b)
		}
	}
	*d = otlpJSONFloat(v)
	return nil
}

// otlpJSONBytes is base64, standard or URL-safe, padded or not (proto3
// JSON accepts each).
type otlpJSONBytes []byte

func (p *otlpJSONBytes) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("bytesValue must be a base64 string")
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if v, err := enc.DecodeString(s); err == nil {
			*p = v
			return nil
		}
	}
	return fmt.Errorf("bytesValue %.40q is not base64", s)
}

// jsonNumberText returns the text of a JSON number or of a string
// holding one; ok is false for null.
func jsonNumberText(b []byte) (string, bool) {
	if string(b) == "null" {
		return "", false
	}
	if len(b) > 0 && b[0] == '"' {
		if c, ok := jsonPlainString(b); ok {
			return string(c), true // (what encoding/json decodes, without its cost)
		}
		var s string
		if json.Unmarshal(b, &s) == nil {
			return s, true
		}
	}
	return string(b), true
}

// decodeOTLPJSON decodes an OTLP/JSON ExportLogsServiceRequest.
func decodeOTLPJSON(b []byte) ([]otlpResource, error) {
	var req otlpJSONRequest
	if err := decodeJSONBody(b, &req); err != nil {
		return nil, err
	}
	out := make([]otlpResource, 0, len(req.ResourceLogs))
	for i, rl := range req.ResourceLogs {
		var res otlpResource
		var err error
		if res.attrs, err = decodeOTLPJSONAttrs(rl.Resource.Attributes, "resource attribute"); err != nil {
			return nil, fmt.Errorf("resourceLogs %d: %w", i, err)
		}
		for _, sl := range rl.ScopeLogs {
			// Sized: grown by append, the records (~300 bytes each) were
			// allocated about twice over.
			sc := otlpScope{name: []byte(sl.Scope.Name), version: []byte(sl.Scope.Version),
				records: make([]otlpRecord, 0, len(sl.LogRecords))}
			var err error
			if sc.attrs, err = decodeOTLPJSONAttrs(sl.Scope.Attributes, "attribute"); err != nil {
				return nil, fmt.Errorf("resourceLogs %d: scope: %w", i, err)
			}
			if sc.dropped, err = jsonUint32(sl.Scope.DroppedAttributesCount, "droppedAttributesCount"); err != nil {
				return nil, fmt.Errorf("resourceLogs %d: scope: %w", i, err)
			}
			for _, lr := range sl.LogRecords {
				rec := otlpRecord{time: uint64(lr.TimeUnixNano), observed: uint64(lr.ObservedTimeUnixNano),
					sevNum: int64(lr.SeverityNumber), sevText: []byte(lr.SeverityText), eventName: []byte(lr.EventName)}
				err := func() (err error) {
					if lr.Body != nil {
						if rec.body, err = lr.Body.decode(0, nil); err != nil {
							return fmt.Errorf("body: %w", err)
						}
					}
					if rec.attrs, err = decodeOTLPJSONAttrs(lr.Attributes, "attribute"); err != nil {
						return err
					}
					if rec.dropped, err = jsonUint32(lr.DroppedAttributesCount, "droppedAttributesCount"); err != nil {
						return err
					}
					if rec.flags, err = jsonUint32(lr.Flags, "flags"); err != nil {
						return err
					}
					if rec.traceID, err = jsonHexID(lr.TraceID, 16, "traceId"); err != nil {
						return err
					}
					rec.spanID, err = jsonHexID(lr.SpanID, 8, "spanId")
					return err
				}()
				if err != nil {
					return nil, fmt.Errorf("resourceLogs %d: log record %d: %w", i, res.nrecords()+len(sc.records), err)
				}
				sc.records = append(sc.records, rec)
			}
			res.scopes = append(res.scopes, sc)
		}
		out = append(out, res)
	}
	return out, nil
}

// decodeOTLPJSONAttrs checks a list of attributes (a JSON array of
// KeyValues, or null) and keeps it as its text (otlpAttrs); what names
// an attribute in messages.
func decodeOTLPJSONAttrs(raw json.RawMessage, what string) (otlpAttrs, error) {
	if err := jsonIsList(raw); err != nil {
		return otlpAttrs{}, fmt.Errorf("%ss: %w", what, err)
	}
	err := jsonElems(raw, func(j int, el []byte) error {
		if key, v, hasVal, ok := jsonKVFast(el); ok {
			if hasVal {
				if err := checkJSONShallow(v, 0, nil); err != nil {
					return fmt.Errorf("%s %d: %q: %w", what, j, key, err)
				}
			}
			return nil
		}
		var kv otlpJSONKV
		if err := json.Unmarshal(el, &kv); err != nil {
			return fmt.Errorf("%s %d: %w", what, j, err)
		}
		if kv.Value != nil {
			if _, err := kv.Value.decode(0, nil); err != nil {
				return fmt.Errorf("%s %d: %q: %w", what, j, kv.Key, err)
			}
		}
		return nil
	})
	return otlpAttrs{json: raw}, err
}

// jsonUint32 checks that a uint32 field's value fits.
func jsonUint32(v otlpJSONUint, name string) (uint64, error) {
	if v > math.MaxUint32 {
		return 0, fmt.Errorf("%s %d does not fit 32 bits", name, v)
	}
	return uint64(v), nil
}

// jsonHexID decodes a trace or span id, which OTLP/JSON writes as hex
// (not base64, unlike other bytes); "" is none.
func jsonHexID(s string, n int, name string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n {
		return nil, fmt.Errorf("%s %.40q is not %d bytes of hex", name, s, n)
	}
	return b, nil
}

// otlpJSONSeverity is a SeverityNumber: a number, or the enum value's
// name (proto3 JSON accepts both).
type otlpJSONSeverity int32

func (sv *otlpJSONSeverity) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return err
		}
		if n, ok := otlpSeverityNames[name]; ok {
			*sv = otlpJSONSeverity(n)
			return nil
		}
	}
	s, ok := jsonNumberText(b)
	if !ok {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return fmt.Errorf("severityNumber %s is neither a number nor a SeverityNumber name", b)
	}
	*sv = otlpJSONSeverity(v)
	return nil
}

// otlpSeverityNames are SeverityNumber's values by name
// (opentelemetry-proto logs.proto): TRACE 1-4, DEBUG 5-8, INFO 9-12,
// WARN 13-16, ERROR 17-20, FATAL 21-24.
var otlpSeverityNames = func() map[string]int32 {
	m := map[string]int32{"SEVERITY_NUMBER_UNSPECIFIED": 0}
	for i, lvl := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"} {
		for j, suffix := range []string{"", "2", "3", "4"} {
			m["SEVERITY_NUMBER_"+lvl+suffix] = int32(4*i + j + 1)
		}
	}
	return m
}()

// decode checks a and the values inside its arrays and maps, each of
// which takes one from *budget (nil: no bound), and decodes it
// (shallow).
func (a *otlpJSONAny) decode(depth int, budget *int) (otlpValue, error) {
	if depth >= otlpMaxDepth {
		return otlpValue{}, fmt.Errorf("values nested deeper than %d", otlpMaxDepth)
	}
	n := 0
	for _, set := range []bool{a.StringValue != nil, a.BoolValue != nil, a.IntValue != nil, a.DoubleValue != nil,
		a.BytesValue != nil, a.ArrayValue != nil, a.KvlistValue != nil} {
		if set {
			n++
		}
	}
	if a.ArrayValue != nil {
		if err := checkJSONList(a.ArrayValue.Values, false, depth, budget); err != nil {
			return otlpValue{}, err
		}
	}
	if a.KvlistValue != nil {
		if err := checkJSONList(a.KvlistValue.Values, true, depth, budget); err != nil {
			return otlpValue{}, err
		}
	}
	if n > 1 {
		// A oneof: proto3 JSON decoders refuse two of its fields.
		return a.shallow(), errors.New("an AnyValue with more than one value")
	}
	return a.shallow(), nil
}

// checkJSONList checks the values of an array (a JSON array of
// AnyValues) or a map (of KeyValues) at depth, each of which takes one
// from *budget (nil: no bound), as encoding/json and decode would decode
// them.
func checkJSONList(b []byte, isMap bool, depth int, budget *int) error {
	// (Scratch for encoding/json made only when it is needed: taken by
	// its address, it is allocated, and a list of lists would allocate
	// them for each.)
	var e *otlpJSONAny
	var kv *otlpJSONKV
	return jsonElems(b, func(i int, el []byte) error {
		if budget != nil {
			*budget--
		}
		if !isMap {
			if v, ok := jsonAnyFast(el); ok {
				if err := checkJSONShallow(v, depth+1, budget); err != nil {
					return fmt.Errorf("value %d: %w", i, err)
				}
				return nil
			}
			e = new(otlpJSONAny)
			if err := json.Unmarshal(el, e); err != nil {
				return fmt.Errorf("value %d: %w", i, err)
			}
			if _, err := e.decode(depth+1, budget); err != nil {
				return fmt.Errorf("value %d: %w", i, err)
			}
			return nil
		}
		if key, v, hasVal, ok := jsonKVFast(el); ok {
			if hasVal {
				if err := checkJSONShallow(v, depth+1, budget); err != nil {
					return fmt.Errorf("value %d: %q: %w", i, key, err)
				}
			}
			return nil
		}
		kv = new(otlpJSONKV)
		if err := json.Unmarshal(el, kv); err != nil {
			return fmt.Errorf("value %d: %w", i, err)
		}
		if kv.Value != nil {
			if _, err := kv.Value.decode(depth+1, budget); err != nil {
				return fmt.Errorf("value %d: %q: %w", i, kv.Key, err)
			}
		}
		return nil
	})
}

// checkJSONShallow is decode's check of a value that jsonAnyFast
// decoded (one field at most).
func checkJSONShallow(v otlpValue, depth int, budget *int) error {
	if depth >= otlpMaxDepth {
		return fmt.Errorf("values nested deeper than %d", otlpMaxDepth)
	}
	if v.enc == otlpJSONText {
		return checkJSONList(v.bytes, v.kind == otlpMap, depth, budget)
	}
	return nil
}

// otlpJSONAnyFields are otlpJSONAny's JSON keys, by jsonAnyFast's field
// numbers.
var otlpJSONAnyFields = []string{"stringValue", "boolValue", "intValue", "doubleValue", "bytesValue", "arrayValue", "kvlistValue"}

// jsonAnyFast decodes (shallow) the AnyValue object el, as encoding/json
// and shallow would, when it is plain: null or an object of at most one
// of the value keys, each key once and in its exact case and without
// escapes (other keys are skipped, as encoding/json skips them), a
// string value without escapes in valid UTF-8, an array or map object
// with no other key than "values". Else ok is false and the caller
// decodes it with encoding/json: that cost ~150 bytes of allocations a
// value, which 3 bytes of "{}," could ask for millions of times.
func jsonAnyFast(el []byte) (v otlpValue, ok bool) {
	i := jsonSpace(el, 0)
	if el[i] == 'n' {
		return v, true // null: a zero otlpJSONAny
	}
	seen := 0
	ok = jsonObject(el, i, func(key, val []byte) bool {
		f := jsonField(key, otlpJSONAnyFields)
		if f < 0 {
			return f == -1 // unknown: skipped; a case variant: encoding/json's
		}
		if seen != 0 || val[0] == 'n' {
			return false // (a second field: encoding/json's error; null: nil)
		}
		seen |= 1 << f
		switch f {
		case 0:
			s, ok := jsonPlainString(val)
			v = otlpValue{kind: otlpString, bytes: s}
			return ok
		case 1:
			v = otlpValue{kind: otlpBool}
			if string(val) == "true" {
				v.num = 1
			}
			return string(val) == "true" || string(val) == "false"
		case 2:
			var x otlpJSONInt
			v = otlpValue{kind: otlpInt}
			if x.UnmarshalJSON(val) != nil {
				return false
			}
			v.num = int64(x)
			return true
		case 3:
			var x otlpJSONFloat
			v = otlpValue{kind: otlpDouble}
			if x.UnmarshalJSON(val) != nil {
				return false
			}
			v.dbl = float64(x)
			return true
		case 5, 6:
			v = otlpValue{kind: otlpArray, enc: otlpJSONText}
			if f == 6 {
				v.kind = otlpMap
			}
			if val[0] != '{' {
				return false
			}
			n := 0
			return jsonObject(val, 0, func(k, list []byte) bool {
				n++
				v.bytes = list
				return n == 1 && string(k) == "values" && (list[0] == '[' || string(list) == "null")
			})
		}
		return false // bytesValue
	})
	return v, ok
}

// jsonKVFast is jsonAnyFast for a KeyValue: its key, and its value if it
// has one.
func jsonKVFast(el []byte) (key []byte, v otlpValue, hasVal, ok bool) {
	i := jsonSpace(el, 0)
	if el[i] == 'n' {
		return nil, v, false, true
	}
	seen := 0
	ok = jsonObject(el, i, func(k, val []byte) bool {
		f := jsonField(k, []string{"key", "value"})
		if f < 0 {
			return f == -1
		}
		if seen&(1<<f) != 0 || val[0] == 'n' {
			return false
		}
		seen |= 1 << f
		if f == 0 {
			var ok bool
			key, ok = jsonPlainString(val)
			return ok
		}
		hasVal = true
		var ok bool
		v, ok = jsonAnyFast(val)
		return ok
	})
	return key, v, hasVal, ok
}

// jsonField is the index of key in names, -1 when it is none of them
// even in another case, -2 when it is one in another case or might be
// (escapes, bytes past ASCII: encoding/json folds them).
func jsonField(key []byte, names []string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf {
			return -2
		}
	}
	for _, n := range names {
		if strings.EqualFold(string(key), n) {
			return -2
		}
	}
	return -1
}

// jsonPlainString is the content of the JSON string s when it has no
// escapes and is valid UTF-8 (what encoding/json decodes it to); ok is
// false otherwise.
func jsonPlainString(s []byte) ([]byte, bool) {
	if len(s) < 2 || s[0] != '"' {
		return nil, false
	}
	c := s[1 : len(s)-1]
	return c, bytes.IndexByte(c, '\\') < 0 && utf8.Valid(c)
}

// jsonObject calls fn with each key (raw: without its quotes, escapes
// kept) and value of the JSON object at b[i], in text checked to be JSON,
// until fn returns false; it returns false when b[i] is not an object or
// fn did.
func jsonObject(b []byte, i int, fn func(key, val []byte) bool) bool {
	if b[i] != '{' {
		return false
	}
	for {
		i = jsonSpace(b, i+1)
		if b[i] == '}' {
			return true
		}
		end := jsonSkip(b, i) // the key
		key := b[i+1 : end-1]
		i = jsonSpace(b, jsonSpace(b, end)+1) // past ':'
		end = jsonSkip(b, i)
		if !fn(key, b[i:end]) {
			return false
		}
		i = jsonSpace(b, end)
		if b[i] == '}' {
			return true
		}
	}
}

// jsonAnyElem decodes (shallow) an AnyValue element that checkJSONList
// checked; scratch is for encoding/json.
func jsonAnyElem(el []byte) otlpValue {
	if v, ok := jsonAnyFast(el); ok {
		return v
	}
	var a otlpJSONAny
	json.Unmarshal(el, &a)
	return a.shallow()
}

// jsonKVElem decodes a KeyValue element that checkJSONList checked;
// plain is whether the key is a slice of el (jsonKVFast).
func jsonKVElem(el []byte) (key []byte, v otlpValue, plain bool) {
	if key, v, _, ok := jsonKVFast(el); ok {
		return key, v, true
	}
	var kv otlpJSONKV
	json.Unmarshal(el, &kv)
	if kv.Value != nil {
		v = kv.Value.shallow()
	}
	return []byte(kv.Key), v, false
}

// shallow is the value of a checked a; an array or a map keeps its
// values as JSON text.
func (a *otlpJSONAny) shallow() otlpValue {
	var v otlpValue
	if a.StringValue != nil {
		v = otlpValue{kind: otlpString, bytes: []byte(*a.StringValue)}
	}
	if a.BoolValue != nil {
		v = otlpValue{kind: otlpBool}
		if *a.BoolValue {
			v.num = 1
		}
	}
	if a.IntValue != nil {
		v = otlpValue{kind: otlpInt, num: int64(*a.IntValue)}
	}
	if a.DoubleValue != nil {
		v = otlpValue{kind: otlpDouble, dbl: float64(*a.DoubleValue)}
	}
	if a.BytesValue != nil {
		v = otlpValue{kind: otlpBytes, bytes: []byte(*a.BytesValue)}
	}
	if a.ArrayValue != nil {
		v = otlpValue{kind: otlpArray, enc: otlpJSONText, bytes: a.ArrayValue.Values}
	}
	if a.KvlistValue != nil {
		v = otlpValue{kind: otlpMap, enc: otlpJSONText, bytes: a.KvlistValue.Values}
	}
	return v
}

// errJSONStop ends jsonElems early.
var errJSONStop = errors.New("stop")

// jsonElems calls fn with each element of the JSON array b (text that
// encoding/json has checked is JSON), until fn returns an error, which
// it returns (but errJSONStop). null or nothing is no elements, as an
// absent or null array decodes to none.
func jsonElems(b []byte, fn func(i int, el []byte) error) error {
	if err := jsonIsList(b); err != nil {
		return fmt.Errorf("values: %w", err)
	}
	i := jsonSpace(b, 0)
	if i == len(b) || b[i] == 'n' {
		return nil
	}
	for n := 0; ; n++ {
		i = jsonSpace(b, i+1)
		if b[i] == ']' {
			return nil
		}
		end := jsonSkip(b, i)
		if err := fn(n, b[i:end]); err != nil {
			if err == errJSONStop {
				return nil
			}
			return err
		}
		i = jsonSpace(b, end)
		if b[i] == ']' {
			return nil
		}
		// b[i] is ','.
	}
}

// jsonIsList checks that the JSON text b (checked to be JSON) is an
// array, null or nothing, as encoding/json would decode into a slice.
func jsonIsList(b []byte) error {
	i := jsonSpace(b, 0)
	if i == len(b) || b[i] == 'n' || b[i] == '[' {
		return nil
	}
	return fmt.Errorf("json: cannot unmarshal %s into an array", jsonTypeName(b[i]))
}

// jsonTypeName names the JSON type that starts with c, for messages.
func jsonTypeName(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// jsonSpace skips JSON white space from b[i].
func jsonSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonSkip returns the end of the JSON value that starts at b[i], in
// text checked to be JSON.
func jsonSkip(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = jsonSkip(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && b[i] != ',' && b[i] != ']' && b[i] != '}' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// renderJSONMap writes the KeyValues of the JSON array b as
// encoding/json writes a map of them: keys sorted, of a repeated key the
// last. It keeps where each entry and its key are in b (16 bytes an
// entry; keys that are not plain strings aside) and decodes each value
// again to write it.
func renderJSONMap(r *jsonRender, b []byte) {
	if len(b) > math.MaxUint32 {
		// (Beyond uint32 offsets: entries as slices.)
		renderJSONMapOf[int](r, b)
		return
	}
	renderJSONMapOf[uint32](r, b)
}

func renderJSONMapOf[T uint32 | int](r *jsonRender, b []byte) {
	type ent struct{ off, n, koff, kn T } // kn ^T(0): koff indexes others
	var others [][]byte
	count := 0
	jsonElems(b, func(int, []byte) error { count++; return nil })
	ents := make([]ent, 0, count)
	jsonElems(b, func(_ int, el []byte) error {
		// el and a plain key are slices of b: b[i:j] has cap(b)-i.
		e := ent{off: T(cap(b) - cap(el)), n: T(len(el))}
		key, _, plain := jsonKVElem(el)
		switch {
		case plain && len(key) > 0:
			e.koff, e.kn = T(cap(b)-cap(key)), T(len(key))
		case plain:
		default:
			e.koff, e.kn = T(len(others)), ^T(0)
			others = append(others, key)
		}
		ents = append(ents, e)
		return nil
	})
	keyOf := func(e ent) []byte {
		if e.kn == ^T(0) {
			return others[e.koff]
		}
		return b[e.koff : e.koff+e.kn]
	}
	slices.SortStableFunc(ents, func(x, y ent) int { return bytes.Compare(keyOf(x), keyOf(y)) })
	first := true
	for n, e := range ents {
		key := keyOf(e)
		if n+1 < len(ents) && bytes.Equal(keyOf(ents[n+1]), key) {
			continue
		}
		if !first {
			r.writeByte(',')
		}
		first = false
		jsonString(r, key)
		r.writeByte(':')
		_, val, _ := jsonKVElem(b[e.off : e.off+e.n])
		r.value(val)
		if r.bad {
			return
		}
	}
}

// ---- mapping ----

// String renders v as the OpenTelemetry collector's Value.AsString does,
// which Loki's docs name for bodies and attribute values: a string as it
// is, booleans and integers in Go's form, doubles as JavaScript (and
// encoding/json) print numbers, bytes in standard base64, maps and arrays
// as JSON (keys sorted, a repeated key's last value; encoding/json's
// escapes; a map or array with a NaN or infinity inside renders empty, as
// encoding/json refuses it there).
func (v otlpValue) String() string {
	s, _ := v.render(-1)
	return s
}

// render is String, giving up (false) when the rendering is longer than
// limit bytes (limit < 0: no limit), past which nothing more is kept: an
// attribute's value past attrs.MaxBytes refuses its record anyway, and
// rendering all of it cost memory out of proportion to the body.
func (v otlpValue) render(limit int) (string, bool) {
	switch v.kind {
	case otlpString:
		if limit >= 0 && len(v.bytes) > limit {
			return "", false
		}
		return string(v.bytes), true
	case otlpBool:
		s := strconv.FormatBool(v.num != 0)
		return s, limit < 0 || len(s) <= limit
	case otlpInt:
		s := strconv.FormatInt(v.num, 10)
		return s, limit < 0 || len(s) <= limit
	case otlpDouble:
		s := otlpDoubleString(v.dbl)
		return s, limit < 0 || len(s) <= limit
	case otlpBytes:
		if limit >= 0 && base64.StdEncoding.EncodedLen(len(v.bytes)) > limit {
			return "", false
		}
		return base64.StdEncoding.EncodeToString(v.bytes), true
	case otlpTooLarge:
		return "", limit < 0
	case otlpEmpty:
		return "", true
	}
	// An array or a map.
	r := jsonRender{limit: limit}
	r.value(v)
	switch {
	case r.bad:
		return "", true
	case limit >= 0 && r.n > limit:
		return "", false
	}
	return string(r.b), true
}

// otlpDoubleString is a double as String renders it.
func otlpDoubleString(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "json: unsupported value: " + strconv.FormatFloat(f, 'g', -1, 64)
	}
	var buf [32]byte
	return string(appendJSONFloat(buf[:0], f))
}

// text is String's first limit+1 bytes (limit < 0: all of it) and the
// length of all of it: a body is a line, which the push refuses or cuts
// past --max-line (validate), and what is past the limit need not be
// kept for that; it is counted, for the refusal's message.
func (v otlpValue) text(limit int) ([]byte, int) {
	keep := func(n int) int {
		if limit >= 0 {
			return min(n, limit+1)
		}
		return n
	}
	switch v.kind {
	case otlpArray, otlpMap:
		r := jsonRender{limit: limit}
		r.value(v)
		if r.bad {
			return []byte{}, 0
		}
		return r.b, r.n
	case otlpBytes:
		n := base64.StdEncoding.EncodedLen(len(v.bytes))
		// The encoding of a prefix of a multiple of 3 bytes is a
		// prefix of the encoding.
		k := len(v.bytes)
		if limit >= 0 {
			k = min(k, (limit+1+3)/4*3)
		}
		b := base64.StdEncoding.AppendEncode(nil, v.bytes[:k])
		return b[:keep(len(b))], n
	case otlpString:
		return slices.Clone(v.bytes[:keep(len(v.bytes))]), len(v.bytes)
	}
	s := v.String() // a scalar: a few bytes
	return []byte(s[:keep(len(s))]), len(s)
}

// jsonRender writes an otlpValue as encoding/json marshals its plain Go
// form (bool, int64, float64, string, []byte, []any, map[string]any),
// keeping the first limit+1 bytes (limit < 0: all) and counting all of
// them. Past the limit it writes nothing more but still walks the value:
// a NaN or infinity further on makes the rendering empty, as
// encoding/json's error did, and the count must be exact.
type jsonRender struct {
	b     []byte
	limit int
	n     int  // length of the whole rendering
	bad   bool // a NaN or infinity (encoding/json's error)
}

// jsonWrite writes p (of length at least 1, or nothing) to r.
func jsonWrite[S ~string | ~[]byte](r *jsonRender, p S) {
	r.n += len(p)
	if r.limit < 0 {
		r.b = append(r.b, p...)
		return
	}
	if room := r.limit + 1 - len(r.b); room > 0 {
		r.b = append(r.b, p[:min(room, len(p))]...)
	}
}

func (r *jsonRender) writeByte(c byte) {
	r.n++
	if r.limit < 0 || len(r.b) <= r.limit {
		r.b = append(r.b, c)
	}
}

func (r *jsonRender) value(v otlpValue) {
	if r.bad {
		return
	}
	switch v.kind {
	case otlpString:
		jsonString(r, v.bytes)
	case otlpBool:
		var buf [8]byte
		jsonWrite(r, strconv.AppendBool(buf[:0], v.num != 0))
	case otlpInt:
		var buf [24]byte
		jsonWrite(r, strconv.AppendInt(buf[:0], v.num, 10))
	case otlpDouble:
		if math.IsNaN(v.dbl) || math.IsInf(v.dbl, 0) {
			r.bad = true
			return
		}
		var buf [32]byte
		jsonWrite(r, appendJSONFloat(buf[:0], v.dbl))
	case otlpBytes:
		r.writeByte('"')
		r.base64(v.bytes)
		r.writeByte('"')
	case otlpArray:
		r.writeByte('[')
		first := true
		v.eachElem(func(e otlpValue) bool {
			if !first {
				r.writeByte(',')
			}
			first = false
			r.value(e)
			return !r.bad
		})
		r.writeByte(']')
	case otlpMap:
		r.writeByte('{')
		switch {
		case v.enc == otlpJSONText:
			renderJSONMap(r, v.bytes)
		case v.enc == otlpDecoded:
			for n, i := range mapOrder(v.kvs) {
				if n > 0 {
					r.writeByte(',')
				}
				jsonString(r, v.kvs[i].key)
				r.writeByte(':')
				r.value(v.kvs[i].val)
			}
		case len(v.bytes) <= math.MaxUint32:
			renderWireMap[uint32](r, v.bytes)
		default:
			renderWireMap[int](r, v.bytes)
		}
		r.writeByte('}')
	default: // otlpEmpty: nil
		jsonWrite(r, "null")
	}
}

// base64 writes p in standard base64, only as much of it as is kept.
func (r *jsonRender) base64(p []byte) {
	n := base64.StdEncoding.EncodedLen(len(p))
	r.n += n
	room := r.limit + 1 - len(r.b)
	if r.limit < 0 || room >= n {
		r.b = base64.StdEncoding.AppendEncode(r.b, p)
		return
	}
	if room <= 0 {
		return
	}
	// The encoding of a prefix of a multiple of 3 bytes is a prefix of
	// the encoding.
	start := len(r.b)
	r.b = base64.StdEncoding.AppendEncode(r.b, p[:min(len(p), (room+3)/4*3)])
	r.b = r.b[:start+room]
}

// renderWireMap writes the entries of a KeyValueList message as
// encoding/json writes a map of them: keys sorted, of a repeated key the
// last. It keeps only each entry's offset (T: uint32 unless the message
// is over 4 GiB) and reads keys again to sort them.
func renderWireMap[T uint32 | int](r *jsonRender, b []byte) {
	offs := make([]T, 0, countProtoField(b, 1))
	for p := b; len(p) > 0; {
		f, t, _, _, rest, err := protoField(p)
		if err != nil {
			break
		}
		if f == 1 && t == wireLen {
			offs = append(offs, T(len(b)-len(p)))
		}
		p = rest
	}
	kv := func(off T) []byte {
		_, _, _, v, _, _ := protoField(b[off:])
		return v
	}
	slices.SortStableFunc(offs, func(x, y T) int { return bytes.Compare(otlpKVKey(kv(x)), otlpKVKey(kv(y))) })
	first := true
	for n, off := range offs {
		key, val := otlpShallowKV(kv(off))
		if n+1 < len(offs) && bytes.Equal(otlpKVKey(kv(offs[n+1])), key) {
			continue
		}
		if !first {
			r.writeByte(',')
		}
		first = false
		jsonString(r, key)
		r.writeByte(':')
		r.value(val)
		if r.bad {
			return
		}
	}
}

// mapOrder is the indexes of kvs as encoding/json writes a map of them:
// keys sorted, of a repeated key the last (a Go map keeps it).
func mapOrder(kvs []otlpKV) []int {
	idx := make([]int, len(kvs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(kvs[a].key, kvs[b].key) })
	out := idx[:0]
	for n, i := range idx {
		if n+1 < len(idx) && kvs[idx[n+1]].key == kvs[i].key {
			continue
		}
		out = append(out, i)
	}
	return out
}

// appendJSONFloat appends f as encoding/json writes a float64 (ES6
// number formatting).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as JavaScript writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString appends s quoted as encoding/json quotes a string
// (jsonString).
func appendJSONString(b, s []byte) []byte {
	r := jsonRender{b: b, limit: -1}
	jsonString(&r, s)
	return r.b
}

// jsonString writes s quoted as encoding/json quotes a string:
// HTML-safe (<, >, & escaped), control bytes as \uXXXX except \b \f \n
// \r \t, U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd.
func jsonString[S ~string | ~[]byte](r *jsonRender, s S) {
	const hex = "0123456789abcdef"
	var esc [6]byte
	r.writeByte('"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			if start < i {
				jsonWrite(r, s[start:i])
			}
			e := esc[:2]
			esc[0] = '\\'
			switch c {
			case '\\', '"':
				esc[1] = c
			case '\b':
				esc[1] = 'b'
			case '\f':
				esc[1] = 'f'
			case '\n':
				esc[1] = 'n'
			case '\r':
				esc[1] = 'r'
			case '\t':
				esc[1] = 't'
			default:
				esc[1], esc[2], esc[3], esc[4], esc[5] = 'u', '0', '0', hex[c>>4], hex[c&0xF]
				e = esc[:6]
			}
			jsonWrite(r, e)
			i++
			start = i
			continue
		}
		// (At most 4 bytes converted: no allocation.)
		rn, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if rn == utf8.RuneError && size == 1 || rn == '\u2028' || rn == '\u2029' {
			if start < i {
				jsonWrite(r, s[start:i])
			}
			if rn == utf8.RuneError {
				jsonWrite(r, `\ufffd`)
			} else {
				esc[0], esc[1], esc[2], esc[3], esc[4], esc[5] = '\\', 'u', '2', '0', '2', hex[rn&0xF]
				jsonWrite(r, esc[:6])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	if start < len(s) {
		jsonWrite(r, s[start:])
	}
	r.writeByte('"')
}

// otlpLabelName is an attribute key as (part of) a label name: each
// character outside [A-Za-z0-9_] becomes '_'. Only the fixed keys of
// otlpIndexAttributes start a name, so it never starts with a digit.
func otlpLabelName(k string) string {
	return strings.Map(func(c rune) rune {
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return c
		}
		return '_'
	}, k)
}

// otlpLabels picks a resource's stream labels. A key given twice keeps
// its first value (as a lookup in the collector's attribute map does).
func otlpLabels(attrs *otlpAttrs) map[string]string {
	labels := map[string]string{}
	var add func(name string, v otlpValue)
	add = func(name string, v otlpValue) {
		if v.kind == otlpMap {
			// Flattened as LogQL's json parser flattens objects.
			v.eachKV(func(k string, e otlpValue) bool {
				add(name+"_"+otlpLabelName(k), e)
				return true
			})
			return
		}
		if _, ok := labels[name]; !ok {
			labels[name] = v.String()
		}
	}
	seen := map[string]bool{}
	attrs.each(func(key string, val otlpValue) bool {
		if otlpIndexAttributes[key] && !seen[key] {
			seen[key] = true
			add(otlpLabelName(key), val)
		}
		return true
	})
	if labels["service_name"] == "" {
		labels["service_name"] = "unknown_service"
	}
	return labels
}

// ---- HTTP ----

type otlpEncoding int

const (
	otlpProtobuf otlpEncoding = iota
	otlpJSON
)

// handleOTLPLogs serves POST /otlp/v1/logs.
func (s *Server) handleOTLPLogs(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	tenant, ok := s.pushTenant(w, r)
	if !ok {
		return
	}
	var enc otlpEncoding
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch strings.ToLower(mt) {
	case "application/x-protobuf":
		enc = otlpProtobuf
	case "application/json":
		enc = otlpJSON
	default:
		// Neither encoding: answer in hay's JSON error form, which a JSON
		// google.rpc.Status reader reads too (it has "message").
		s.met.rejected.WithLabelValues("bad_content_type").Inc()
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Type %q: OTLP/HTTP is application/x-protobuf or application/json; nothing was stored", r.Header.Get("Content-Type")))
		return
	}
	rejected, msg, err := s.otlpPush(r, tenant, enc)
	s.met.pushDur.WithLabelValues("otlp").Observe(time.Since(start).Seconds())
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			s.met.rejected.WithLabelValues(he.reason).Inc()
			if ra := he.retryAfter(); ra != "" {
				// OTLP/HTTP exporters honour it on 429 and 503.
				w.Header().Set("Retry-After", ra)
			}
			writeOTLPStatus(w, enc, he.status, he.msg)
			return
		}
		s.log.Error("otlp push failed", "tenant", tenant, "err", err)
		writeOTLPStatus(w, enc, http.StatusInternalServerError, "storing the push failed: "+err.Error()+"; its records may or may not be stored")
		return
	}
	writeOTLPResponse(w, enc, rejected, msg)
}

// otlpPush reads, decodes, validates and stores an OTLP logs body. It
// returns how many records were refused and why when some were stored;
// an error when the body is unreadable, nothing was stored, or the store
// failed.
func (s *Server) otlpPush(r *http.Request, tenant string, enc otlpEncoding) (int, string, error) {
	rawRelease, err := s.admitRaw(r)
	if err != nil {
		return 0, "", err
	}
	body, err := s.readBody(r, false)
	rawRelease()
	if err != nil {
		return 0, "", err
	}
	release, err := s.admitPush(r.Context(), int64(len(body)))
	if err != nil {
		return 0, "", err
	}
	defer release()
	var res []otlpResource
	name := "protobuf"
	if enc == otlpJSON {
		name = "JSON"
		res, err = decodeOTLPJSON(body)
	} else {
		res, err = decodeOTLPProto(body)
	}
	if err != nil {
		return 0, "", badRequest("malformed", "malformed OTLP %s logs request: %v; nothing was stored", name, err)
	}
	// Resource and scope attributes are repeated in each record's
	// metadata: beyond the body's size, that memory takes budget too.
	if n := otlpSharedMetaBytes(res); n > int64(len(body)) {
		if limit := s.inflightLimit(); limit >= 0 && n > limit {
			return 0, "", &httpError{status: http.StatusRequestEntityTooLarge, reason: "inflight_too_large", msg: fmt.Sprintf(
				"the request's resource and scope attributes, repeated as the structured metadata of each of its records, come to %d bytes, more than --max-inflight-push-bytes (%d); nothing was stored; send fewer records a request", n, limit)}
		}
		release, err := s.admitPush(r.Context(), n)
		if err != nil {
			return 0, "", err
		}
		defer release()
	}
	pre := new(pushRejects)
	streams := otlpStreams(res, s.cfg.Now().UnixNano(), s.cfg.MaxLine, pre)
	entries, cuts, rj := s.validate(streams)
	rj = pre.merge(rj)
	if len(entries) == 0 {
		// Nothing stored: 400 when some were refused (OTLP's "Bad Data":
		// not retryable); an empty request is a success.
		return 0, "", rj.err(0)
	}
	stored, sr, err := s.storeEntries(r.Context(), tenant, entries, cuts)
	if err != nil {
		return 0, "", err
	}
	if sr != nil {
		// 429, as Loki answers its OTLP endpoint past the stream limit.
		return 0, "", sr.err(rj, stored)
	}
	if rj.entries == 0 {
		return 0, "", nil
	}
	s.met.rejected.WithLabelValues(rj.reason).Inc()
	var he *httpError
	errors.As(rj.err(stored), &he)
	return rj.entries, he.msg, nil
}

// merge returns rj's refusals followed by o's.
func (rj *pushRejects) merge(o *pushRejects) *pushRejects {
	if rj.entries == 0 {
		return o
	}
	for _, m := range o.msgs {
		if len(rj.msgs) < 3 {
			rj.msgs = append(rj.msgs, m)
		}
	}
	rj.entries += o.entries
	return rj
}

// writeOTLPResponse answers 200 with an ExportLogsServiceResponse, its
// partial_success set when records were refused.
func writeOTLPResponse(w http.ResponseWriter, enc otlpEncoding, rejected int, msg string) {
	if enc == otlpJSON {
		w.Header().Set("Content-Type", "application/json")
		if rejected == 0 {
			w.Write([]byte("{}"))
			return
		}
		// int64 fields are strings in proto3 JSON.
		b, _ := json.Marshal(map[string]any{"partialSuccess": map[string]any{
			"rejectedLogRecords": strconv.Itoa(rejected),
			"errorMessage":       msg,
		}})
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	if rejected == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	var ps []byte
	ps = binary.AppendUvarint(ps, 1<<3|wireVarint)
	ps = binary.AppendUvarint(ps, uint64(rejected))
	ps = appendBytesField(ps, 2, []byte(msg))
	w.Write(appendBytesField(nil, 1, ps))
}

// writeOTLPStatus answers a failure with a google.rpc.Status carrying the
// message (OTLP/HTTP does not use its code), in the request's encoding.
func writeOTLPStatus(w http.ResponseWriter, enc otlpEncoding, status int, msg string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if enc == otlpJSON {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		b, _ := json.Marshal(map[string]string{"message": msg})
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(status)
	w.Write(appendBytesField(nil, 2, []byte(msg)))
}
