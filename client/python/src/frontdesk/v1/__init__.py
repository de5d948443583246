"""Generated protobuf and gRPC code for the frontdesk.v1 contract (buf generate; do not edit
the *_pb2* modules by hand)."""
