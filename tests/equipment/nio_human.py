"""A person on matrix-nio, for the Matrix tests: a second Matrix client, independent of the
SDK crucible's bot is built on, with end-to-end encryption and nio's default (strict)
sending settings: a message to a room with a device nobody verified is refused
(OlmUnverifiedDeviceError).

    nio_human.py HOMESERVER USER PASSWORD STORE_DIR

It logs in as a new device, syncs in the background, and reads commands from standard
input, one JSON object a line ({"do": ..., ...}). Everything that happens is one JSON
object a line on standard output: {"reply": do, "ok": ..., ...} answers a command, in the
order they came; {"event": ...} is something the homeserver brought (a message, a
verification's progress). Its own diagnostics go to standard error.

Commands:
  {"do": "create_room", "invite": [user...], "direct": bool}  -> room_id (encrypted room)
  {"do": "wait_joined", "room": id, "user": id}                -> once it saw the user join
  {"do": "devices", "user": id}                                -> [{device_id, ed25519, verified}]
  {"do": "verify", "user": id, "device": id}                   -> transaction_id (emoji start)
  {"do": "confirm", "transaction_id": id}                      -> the emoji match: send the MAC
  {"do": "send", "room": id, "text": str}                      -> event_id, or error/error_type
  {"do": "quit"}

Events:
  {"event": "logged_in", "user_id", "device_id"}
  {"event": "message", "room", "sender", "event_id", "body", "decrypted"}
  {"event": "undecryptable", "room", "sender", "event_id"}
  {"event": "member", "room", "user", "membership"}
  {"event": "verification", "state": "emoji", "transaction_id", "emoji": [{symbol, description}]}
  {"event": "verification", "state": "done", "transaction_id", "device"}
  {"event": "verification", "state": "cancelled", "transaction_id", "code", "reason"}
"""

import asyncio
import json
import sys

from nio import (
    AsyncClient,
    AsyncClientConfig,
    KeyVerificationCancel,
    KeyVerificationEvent,
    KeyVerificationKey,
    KeyVerificationMac,
    LoginResponse,
    MegolmEvent,
    RoomCreateResponse,
    RoomMemberEvent,
    RoomMessageText,
    RoomSendResponse,
    ToDeviceError,
)
from nio.exceptions import OlmTrustError

# How long a command may wait for what it needs (a member, a device's keys).
WAIT = 60


def out(obj):
    print(json.dumps(obj, ensure_ascii=False), flush=True)


class Person:
    def __init__(self, client: AsyncClient):
        self.client = client
        # (room, user) pairs seen joined.
        self.joined = set()
        # Transactions whose emoji were shown, and whose end was told.
        self.shown = set()
        self.ended = set()

    def on_message(self, room, event):
        out(
            {
                "event": "message",
                "room": room.room_id,
                "sender": event.sender,
                "event_id": event.event_id,
                "body": event.body,
                "decrypted": bool(getattr(event, "decrypted", False)),
            }
        )

    def on_undecryptable(self, room, event):
        out(
            {
                "event": "undecryptable",
                "room": room.room_id,
                "sender": event.sender,
                "event_id": event.event_id,
            }
        )

    def on_member(self, room, event):
        if event.membership == "join":
            self.joined.add((room.room_id, event.state_key))
        out(
            {
                "event": "member",
                "room": room.room_id,
                "user": event.state_key,
                "membership": event.membership,
            }
        )

    def on_verification(self, event):
        """Runs after nio's own handling of the event (its SAS state is up to date)."""
        tx = event.transaction_id
        sas = self.client.key_verifications.get(tx)
        if isinstance(event, KeyVerificationCancel):
            self.tell_cancelled(tx, event.code, event.reason)
        elif sas is not None and sas.canceled:
            self.tell_cancelled(tx, sas.cancel_code, sas.cancel_reason)
        elif isinstance(event, KeyVerificationKey) and sas is not None:
            if tx not in self.shown:
                self.shown.add(tx)
                emoji = [{"symbol": s, "description": d} for s, d in sas.get_emoji()]
                out({"event": "verification", "state": "emoji", "transaction_id": tx, "emoji": emoji})
        elif isinstance(event, KeyVerificationMac) and sas is not None and sas.verified:
            self.tell_done(tx, sas)

    def tell_cancelled(self, tx, code, reason):
        if tx in self.ended:
            return
        self.ended.add(tx)
        out({"event": "verification", "state": "cancelled", "transaction_id": tx, "code": code, "reason": reason})

    def tell_done(self, tx, sas):
        if tx in self.ended:
            return
        self.ended.add(tx)
        out(
            {
                "event": "verification",
                "state": "done",
                "transaction_id": tx,
                "device": sas.other_olm_device.id,
            }
        )

    async def until(self, check, what):
        for _ in range(WAIT * 10):
            found = check()
            if found:
                return found
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{what} within {WAIT} s")

    async def command(self, cmd):
        do = cmd.get("do")
        c = self.client
        if do == "create_room":
            response = await c.room_create(
                is_direct=bool(cmd.get("direct")),
                invite=cmd.get("invite", []),
                initial_state=[
                    {
                        "type": "m.room.encryption",
                        "state_key": "",
                        "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                    }
                ],
            )
            if not isinstance(response, RoomCreateResponse):
                raise RuntimeError(f"create a room: {response}")
            return {"room_id": response.room_id}
        if do == "wait_joined":
            key = (cmd["room"], cmd["user"])
            await self.until(lambda: key in self.joined, f"{cmd['user']} did not join {cmd['room']}")
            return {}
        if do == "devices":
            user = cmd["user"]
            await self.until(
                lambda: list(c.device_store.active_user_devices(user)),
                f"no device keys of {user}",
            )
            return {
                "devices": [
                    {"device_id": d.id, "ed25519": d.ed25519, "verified": d.verified}
                    for d in c.device_store.active_user_devices(user)
                ]
            }
        if do == "verify":
            user, device_id = cmd["user"], cmd["device"]
            device = await self.until(
                lambda: c.device_store[user].get(device_id) if user in c.device_store.users else None,
                f"no keys of {user}'s device {device_id}",
            )
            message = c.create_key_verification(device)
            response = await c.to_device(message)
            if isinstance(response, ToDeviceError):
                raise RuntimeError(f"start the verification: {response}")
            return {"transaction_id": message.content["transaction_id"]}
        if do == "confirm":
            tx = cmd["transaction_id"]
            response = await c.confirm_short_auth_string(tx)
            if isinstance(response, ToDeviceError):
                raise RuntimeError(f"confirm the emoji: {response}")
            # The other side's MAC may have come first: then it is verified now.
            sas = c.key_verifications.get(tx)
            if sas is not None and sas.verified:
                self.tell_done(tx, sas)
            return {}
        if do == "send":
            # nio's defaults: ignore_unverified_devices=False.
            response = await c.room_send(
                cmd["room"], "m.room.message", {"msgtype": "m.text", "body": cmd["text"]}
            )
            if not isinstance(response, RoomSendResponse):
                raise RuntimeError(f"send: {response}")
            return {"event_id": response.event_id}
        raise ValueError(f"unknown command {do!r}")


async def commands(person: Person):
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        cmd = json.loads(line)
        do = cmd.get("do")
        if do == "quit":
            return
        try:
            answer = await person.command(cmd)
            out({"reply": do, "ok": True, **answer})
        except OlmTrustError as e:
            out({"reply": do, "ok": False, "error_type": type(e).__name__, "error": str(e)})
        except Exception as e:  # noqa: BLE001 - every failure is told to the test
            out({"reply": do, "ok": False, "error_type": type(e).__name__, "error": str(e)})


async def main():
    homeserver, user, password, store = sys.argv[1:5]
    config = AsyncClientConfig(encryption_enabled=True, store_sync_tokens=True)
    client = AsyncClient(homeserver, user, store_path=store, config=config)
    person = Person(client)
    client.add_event_callback(person.on_message, RoomMessageText)
    client.add_event_callback(person.on_undecryptable, MegolmEvent)
    client.add_event_callback(person.on_member, RoomMemberEvent)
    client.add_to_device_callback(person.on_verification, KeyVerificationEvent)
    response = await client.login(password, device_name="nio person")
    if not isinstance(response, LoginResponse):
        out({"event": "login_failed", "error": str(response)})
        await client.close()
        sys.exit(1)
    if client.should_upload_keys:
        await client.keys_upload()
    out({"event": "logged_in", "user_id": client.user_id, "device_id": client.device_id})
    sync = asyncio.ensure_future(client.sync_forever(timeout=5000, full_state=True))
    try:
        await commands(person)
    finally:
        sync.cancel()
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
