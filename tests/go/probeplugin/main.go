// probeplugin is a go-plugin plugin that reports what it can reach, for the confinement tests.
// It serves the KV contract (cookie BASIC_PLUGIN=hello) with probe commands as keys:
//
//	Get "read:PATH"    the file's contents; PermissionDenied / NotFound / Internal on error
//	Get "list:DIR"     the directory's entry names, one per line
//	Get "env:NAME"     the variable's value; NotFound when unset
//	Get "envall:"      every NAME=VALUE of its environment, one per line
//	Get "secret:NAME"  the file NAME in $TETHER_SECRETS_DIR
//	Get "pid:"         its process id
//	Get "unix-talk:PATH"  connects to a daemon's unix socket and reads its greeting:
//	                   "ok GREETING", "connected, no answer: ERR", or the connect error
//	Get "ps:"          every process it can see, "PID PPID CMDLINE" a line, its own first
//	Get "fill:PATH"    writes up to 1 GiB into PATH (a leading $TMPDIR is its TMPDIR), then
//	                   removes it: "ENOSPC BYTES" (the errno's name) or "ok BYTES"
//	Put "write:PATH"   writes the value to PATH
package main

import (
	"context"
	"errors"
	"fmt"
	"io/ioutil"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	case "unix-talk":
		return &proto.GetResponse{Value: []byte(unixTalk(arg))}, nil
	case "ps":
		return &proto.GetResponse{Value: []byte(processes())}, nil
	case "fill":
		if strings.HasPrefix(arg, "$TMPDIR") {
			arg = os.TempDir() + strings.TrimPrefix(arg, "$TMPDIR")
		}
		return &proto.GetResponse{Value: []byte(fill(arg))}, nil
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

// talkTimeout is how long unix-talk waits for the daemon's greeting.
const talkTimeout = 2 * time.Second

// fillLimit is what fill writes at most: 1 GiB.
const fillLimit = 1 << 30

// errnoName is the errno's symbolic name for the errors the tests compare, else the error.
func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOSPC:
			return "ENOSPC"
		case syscall.EACCES:
			return "EACCES"
		case syscall.EPERM:
			return "EPERM"
		case syscall.ENOENT:
			return "ENOENT"
		case syscall.EROFS:
			return "EROFS"
		case syscall.ECONNREFUSED:
			return "ECONNREFUSED"
		case syscall.EDQUOT:
			return "EDQUOT"
		case syscall.EFBIG:
			return "EFBIG"
		}
		return fmt.Sprintf("E%d", int(errno))
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return "ETIMEDOUT"
	}
	return "error: " + err.Error()
}

func unixTalk(path string) string {
	conn, err := net.DialTimeout("unix", path, talkTimeout)
	if err != nil {
		return errnoName(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(talkTimeout))
	_, _ = conn.Write([]byte("hello from a plugin\n"))
	answer := make([]byte, 256)
	n, err := conn.Read(answer)
	if err != nil {
		return "connected, no answer: " + errnoName(err)
	}
	return "ok " + strings.TrimRight(string(answer[:n]), "\n")
}

func processes() string {
	entries, _ := ioutil.ReadDir("/proc")
	me := os.Getpid()
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool {
		if (pids[i] == me) != (pids[j] == me) {
			return pids[i] == me
		}
		return pids[i] < pids[j]
	})
	lines := make([]string, 0, len(pids))
	for _, pid := range pids {
		ppid := "?"
		if stat, err := ioutil.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			s := string(stat)
			if i := strings.LastIndex(s, ")"); i >= 0 {
				if fields := strings.Fields(s[i+1:]); len(fields) > 1 {
					ppid = fields[1]
				}
			}
		}
		cmdline := ""
		if b, err := ioutil.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil {
			cmdline = "<" + errnoName(err) + ">"
		} else {
			cmdline = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		}
		lines = append(lines, fmt.Sprintf("%d %s %s", pid, ppid, cmdline))
	}
	return strings.Join(lines, "\n")
}

func fill(path string) string {
	f, err := os.Create(path)
	if err != nil {
		return errnoName(err) + " 0"
	}
	chunk := make([]byte, 1<<20)
	written := 0
	outcome := "ok"
	for written < fillLimit {
		n, err := f.Write(chunk)
		written += n
		if err != nil {
			outcome = errnoName(err)
			break
		}
	}
	f.Close()
	os.Remove(path)
	return fmt.Sprintf("%s %d", outcome, written)
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins:         shared.PluginMap(probe{}),
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
