package main

import (
	"encoding/json"
	"errors"

	"github.com/scribe-es/scribe/runtime"
)

// The shop's history. Its first release stored two event types this build
// no longer writes:
//   - StockAdded{sku, units}: renamed Restocked (same data);
//   - ProductAdded{sku, units}: a product listed with its first stock, split
//     into ProductListed and Restocked.
//
// Those stored events stay as they are (positions, versions, hash chain):
// the upcasters below read them as this build's events, at every read.

// productAddedV1 is the data of a first-release ProductAdded event.
type productAddedV1 struct {
	SKU   string `json:"sku"`
	Units int    `json:"units"`
}

// registerHistory registers the upcasters of the shop's older events and
// ProductListed, which this build only reads.
func registerHistory(rt *runtime.Runtime) error {
	return errors.Join(
		runtime.RegisterEvent[ProductListed](rt, "ProductListed", 1),
		// A rename: StockAdded v1 is Restocked v1.
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "StockAdded", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "Restocked", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				return []runtime.Upcast{{Type: "Restocked", SchemaVersion: 1, Data: data}}, nil
			},
		}),
		// A split: ProductAdded v1 is ProductListed then Restocked.
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "ProductAdded", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "ProductListed", SchemaVersion: 1}, {Type: "Restocked", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				var old productAddedV1
				if err := json.Unmarshal(data, &old); err != nil {
					return nil, err
				}
				listed, err := json.Marshal(ProductListed{SKU: old.SKU})
				if err != nil {
					return nil, err
				}
				restocked, err := json.Marshal(Restocked{SKU: old.SKU, Units: old.Units})
				if err != nil {
					return nil, err
				}
				return []runtime.Upcast{
					{Type: "ProductListed", SchemaVersion: 1, Data: listed},
					{Type: "Restocked", SchemaVersion: 1, Data: restocked},
				}, nil
			},
		}),
	)
}
