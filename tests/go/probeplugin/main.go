// probeplugin is a go-plugin plugin that reports what it can reach, for the confinement tests.
// It serves the KV contract (cookie BASIC_PLUGIN=hello) with probe commands as keys:
//
//	Get "read:PATH"    the file's contents; PermissionDenied / NotFound / Internal on error
//	Get "list:DIR"     the directory's entry names, one per line
//	Get "env:NAME"     the variable's value; NotFound when unset
//	Get "envall:"      every NAME=VALUE of its environment, one per line
//	Get "secret:NAME"  the file NAME in $TETHER_SECRETS_DIR
//	Get "pid:"         its process id
//	Put "write:PATH"   writes the value to PATH
package main

import (
	"context"
	"errors"
	"io/ioutil"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tether.test/interop/proto"
	"tether.test/interop/shared"
)

type probe struct{}

func fsError(op, path string, err error) error {
	switch {
	case errors.Is(err, os.ErrPermission):
		return status.Errorf(codes.PermissionDenied, "%s %s: %v", op, path, err)
	case errors.Is(err, os.ErrNotExist):
		return status.Errorf(codes.NotFound, "%s %s: %v", op, path, err)
	default:
		return status.Errorf(codes.Internal, "%s %s: %v", op, path, err)
	}
}

func (probe) Get(_ context.Context, req *proto.GetRequest) (*proto.GetResponse, error) {
	cmd, arg := req.Key, ""
	if i := strings.Index(req.Key, ":"); i >= 0 {
		cmd, arg = req.Key[:i], req.Key[i+1:]
	}
	switch cmd {
	case "read":
		b, err := ioutil.ReadFile(arg)
		if err != nil {
			return nil, fsError("read", arg, err)
		}
		return &proto.GetResponse{Value: b}, nil
	case "list":
		entries, err := ioutil.ReadDir(arg)
		if err != nil {
			return nil, fsError("list", arg, err)
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return &proto.GetResponse{Value: []byte(strings.Join(names, "\n"))}, nil
	case "env":
		v, ok := os.LookupEnv(arg)
		if !ok {
			return nil, status.Errorf(codes.NotFound, "%s is not set", arg)
		}
		return &proto.GetResponse{Value: []byte(v)}, nil
	case "envall":
		return &proto.GetResponse{Value: []byte(strings.Join(os.Environ(), "\n"))}, nil
	case "secret":
		dir, ok := os.LookupEnv("TETHER_SECRETS_DIR")
		if !ok {
			return nil, status.Errorf(codes.NotFound, "TETHER_SECRETS_DIR is not set")
		}
		path := filepath.Join(dir, arg)
		b, err := ioutil.ReadFile(path)
		if err != nil {
			return nil, fsError("read", path, err)
		}
		return &proto.GetResponse{Value: b}, nil
	case "pid":
		return &proto.GetResponse{Value: []byte(strconv.Itoa(os.Getpid()))}, nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "unknown probe %q", req.Key)
}

func (probe) Put(_ context.Context, req *proto.PutRequest) (*proto.Empty, error) {
	if strings.HasPrefix(req.Key, "write:") {
		path := strings.TrimPrefix(req.Key, "write:")
		if err := ioutil.WriteFile(path, req.Value, 0o600); err != nil {
			return nil, fsError("write", path, err)
		}
		return &proto.Empty{}, nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "unknown probe %q", req.Key)
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins:         shared.PluginMap(probe{}),
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
