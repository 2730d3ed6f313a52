"""Client A of a bridge with per-client tokens, written with grpcio, trying what an attacker
holding A's own valid token would: speak as client B's sender, send as B through
SendCommand, read B's upload, and use the old shared token. Prints one JSON object with
the status code each attempt got.
"""

import json
import sys

import grpc

import messenger_pb2 as pb
import messenger_pb2_grpc as rpc

addr, token_a, token_b, shared = sys.argv[1:5]
seen = {}


def code(call):
    try:
        result = call()
        if hasattr(result, "__iter__") and not isinstance(result, (str, bytes)):
            list(result)
        return "OK"
    except grpc.RpcError as error:
        return error.code().name


with grpc.insecure_channel(addr) as channel:
    grpc.channel_ready_future(channel).result(timeout=20)
    stub = rpc.RoboMessengerStub(channel)
    as_a = [("x-robo-claw-peer-token", token_a)]
    as_b = [("x-robo-claw-peer-token", token_b)]

    seen["stream_as_b"] = code(lambda: stub.ChatStream(
        iter([pb.ChatMessage(sender_id="bob", content="/approve",
                             metadata={"room_id": "lab"})]),
        metadata=as_a, timeout=20))
    seen["command_as_b"] = code(lambda: stub.SendCommand(
        pb.ChatMessage(sender_id="bob", content="approve", metadata={"room_id": "lab"}),
        metadata=as_a, timeout=20))

    uploaded = stub.UploadFile(iter([pb.FileChunk(filename="b.txt", data=b"B only",
                                                  is_last=True)]),
                               metadata=as_b, timeout=20)
    seen["download_bs_file"] = code(lambda: stub.DownloadFile(
        pb.DownloadRequest(file_id=uploaded.file_id), metadata=as_a, timeout=20))
    seen["shared_token"] = code(lambda: stub.SendCommand(
        pb.ChatMessage(sender_id="alice", content="status"),
        metadata=[("x-robo-claw-peer-token", shared)], timeout=20))

print(json.dumps(seen))
