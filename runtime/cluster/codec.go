package cluster

import (
	"fmt"
	"reflect"

	"github.com/scribe-es/scribe/internal/clusterpb"
	"github.com/scribe-es/scribe/runtime"
)

func (c *clusterNode) encodeCommand(cmd any) (*clusterpb.Payload, error) {
	typ := reflect.TypeOf(cmd)
	name, ok := c.commandsByType[typ]
	if !ok {
		return nil, fmt.Errorf("%w: command type %v is not listed in cluster.Config.Commands, so it cannot be sent to the member hosting its stream; add cluster.Command[%v](\"<name>\")", runtime.ErrUnknownCommand, typ, typ)
	}
	data, err := c.node.Codec.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: encoding command %q for another member: %w", name, err)
	}
	return &clusterpb.Payload{Type: name, Data: data}, nil
}

func (c *clusterNode) decodeCommand(p *clusterpb.Payload) (any, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: an envelope arrived without a command", runtime.ErrUnknownCommand)
	}
	typ, ok := c.commandsByName[p.Type]
	if !ok {
		return nil, fmt.Errorf("%w: command %q is not listed in this member's cluster.Config.Commands; every member must list the same commands", runtime.ErrUnknownCommand, p.Type)
	}
	ptr := reflect.New(typ)
	if err := c.node.Codec.Unmarshal(p.Data, ptr.Interface()); err != nil {
		return nil, fmt.Errorf("cluster: decoding command %q from another member: %w", p.Type, err)
	}
	return ptr.Elem().Interface(), nil
}
