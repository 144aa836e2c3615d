"""Verifies a stored inbox row again with Stripe's own library (storeRawBody, issue 15).

Reads one JSON object on stdin: {"raw_body_hex", "signature", "secret"}: the row's raw_body
column as hex, the Stripe-Signature header stored with it, and the endpoint secret. Prints
{"verified": true, "id": <event id>} when stripe.Webhook.construct_event accepts the bytes, else
{"verified": false, "error": <message>}. The tolerance is Stripe's default (300 s).
"""

import json
import sys

import stripe


def main() -> None:
    request = json.load(sys.stdin)
    raw = bytes.fromhex(request["raw_body_hex"])
    try:
        event = stripe.Webhook.construct_event(raw, request["signature"], request["secret"])
        print(json.dumps({"verified": True, "id": event["id"]}))
    except (stripe.SignatureVerificationError, ValueError) as err:
        print(json.dumps({"verified": False, "error": str(err)}))


if __name__ == "__main__":
    main()
