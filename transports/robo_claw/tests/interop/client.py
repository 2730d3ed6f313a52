"""A RoboClaw client written with grpcio (Python), for the interoperability test.

Stubs are generated from proto/messenger.proto by the test, so the proto is the only
contract. Prints one JSON object with what it saw.
"""

import json
import sys

import grpc

import messenger_pb2 as pb
import messenger_pb2_grpc as rpc

addr, token = sys.argv[1], sys.argv[2]
header = [("x-robo-claw-peer-token", token)]
seen = {}

with grpc.insecure_channel(addr) as channel:
    grpc.channel_ready_future(channel).result(timeout=20)
    stub = rpc.RoboMessengerStub(channel)

    def chunks():
        yield pb.FileChunk(filename="hello.txt", data=b"hello ")
        yield pb.FileChunk(data=b"from python", is_last=True)

    uploaded = stub.UploadFile(chunks(), metadata=header, timeout=20)
    seen["upload"] = {"success": uploaded.success, "file_id": uploaded.file_id}

    downloaded = stub.DownloadFile(
        pb.DownloadRequest(file_id=uploaded.file_id), metadata=header, timeout=20
    )
    pieces = list(downloaded)
    seen["download"] = {
        "data": b"".join(piece.data for piece in pieces).decode(),
        "filename": pieces[0].filename,
        "last": pieces[-1].is_last,
    }

    command = stub.SendCommand(
        pb.ChatMessage(sender_id="py", content="status", metadata={"room_id": "py-room"}),
        metadata=header,
        timeout=20,
    )
    seen["command"] = {"success": command.success, "message": command.message,
                       "result": json.loads(command.result_json)}

    # The token in the first message instead of the call metadata; the client then stops
    # sending and keeps reading, which a gRPC server must allow.
    first = pb.ChatMessage(
        sender_id="py",
        content="hello from python",
        timestamp=1700000000000,
        metadata={"room_id": "py-room", "auth_token": token, "file_id": uploaded.file_id},
    )
    replies = stub.ChatStream(iter([first]), timeout=20)
    reply = next(replies)
    seen["reply"] = {"sender_id": reply.sender_id, "content": reply.content,
                     "room": reply.metadata.get("room_id")}
    replies.cancel()

    try:
        list(stub.ChatStream(iter([pb.ChatMessage(sender_id="py", content="x")]),
                             metadata=[("x-robo-claw-peer-token", "wrong")], timeout=20))
        seen["wrong_token"] = "OK"
    except grpc.RpcError as error:
        seen["wrong_token"] = error.code().name

print(json.dumps(seen))
