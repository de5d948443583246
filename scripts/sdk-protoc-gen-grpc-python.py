#!/usr/bin/env python3
"""protoc plugin that runs grpcio-tools' grpc_python generator (for buf's local plugins).

grpcio-tools (PyPI) links the grpc_python generator into its own protoc but ships no
separate protoc-gen-grpc_python program, and buf only proxies protoc's own builtins
(python, pyi, ...) to a protoc binary. This plugin reads buf's CodeGeneratorRequest, hands
the descriptors to grpcio-tools' protoc with --descriptor_set_in, and returns what it wrote.
Run it with the interpreter that has grpcio-tools (scripts/sdk-protoc-gen-grpc-python).
"""
import os
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse()
    response.supported_features = plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    with tempfile.TemporaryDirectory() as tmp:
        fds = descriptor_pb2.FileDescriptorSet(file=request.proto_file)
        fds_path = os.path.join(tmp, "input.binpb")
        with open(fds_path, "wb") as f:
            f.write(fds.SerializeToString())
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        target = f"{request.parameter}:{out}" if request.parameter else out
        args = ["protoc", f"--descriptor_set_in={fds_path}", f"--grpc_python_out={target}"]
        args += list(request.file_to_generate)
        if protoc.main(args) != 0:
            response.error = "grpc_tools.protoc failed for " + " ".join(request.file_to_generate)
        else:
            for dirpath, _, names in os.walk(out):
                for name in sorted(names):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        response.file.add(name=os.path.relpath(path, out), content=f.read())
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
