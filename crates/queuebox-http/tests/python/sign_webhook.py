"""Signs a webhook the way its sender does, with the sender's own library (INB-20a..20f tests).

Reads one JSON object on stdin: {"preset", "secret", "body", "timestamp", "id"} and prints the
headers the sender would send, as a JSON object. Only the providers' libraries compute the
signatures: `stripe`, `standardwebhooks` and `slack_sdk`, pinned in scripts/test-requirements.txt.
"""

import json
import sys
from datetime import datetime, timezone


def main() -> None:
    request = json.load(sys.stdin)
    preset = request["preset"]
    secret = request["secret"]
    body = request["body"]
    timestamp = int(request["timestamp"])
    if preset == "stripe":
        import stripe

        header = stripe.WebhookSignature.generate_signature_header(body, secret, timestamp)
        headers = {"Stripe-Signature": header}
    elif preset == "standard-webhooks":
        from standardwebhooks.webhooks import Webhook

        msg_id = request["id"]
        sent = datetime.fromtimestamp(timestamp, tz=timezone.utc)
        signature = Webhook(secret).sign(msg_id, sent, body)
        prefix = request.get("prefix", "webhook")
        headers = {
            f"{prefix}-id": msg_id,
            f"{prefix}-timestamp": str(timestamp),
            f"{prefix}-signature": signature,
        }
    elif preset == "slack":
        from slack_sdk.signature import SignatureVerifier

        signature = SignatureVerifier(secret).generate_signature(
            timestamp=str(timestamp), body=body
        )
        headers = {
            "X-Slack-Signature": signature,
            "X-Slack-Request-Timestamp": str(timestamp),
        }
    else:
        raise SystemExit(f"no sender library for preset {preset!r}")
    json.dump(headers, sys.stdout)


if __name__ == "__main__":
    main()
