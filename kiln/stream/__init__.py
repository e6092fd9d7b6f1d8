"""The token stream's client side, for training code: a deterministic, resumable consumer of token-id messages
and the producer that publishes tokenised shards (docs/kafka.md, "What training code calls").

    from kiln.stream import TokenConsumer
    stream = TokenConsumer(bootstrap="kafka:9092", topic="pretrain-tokens", rank=rank, world=world,
                           tokens_per_message=2048, batch_messages=8)
    stream.load_state_dict(checkpoint["stream"])     # on resume; merged states of every rank
    batch = stream.next_batch()                       # numpy (8, 2048), the same sequence after every resume
    checkpoint["stream"] = stream.state_dict()        # saved with the model, not committed to Kafka

Needs confluent-kafka and numpy (`pip install 'kiln[stream]'`).
"""

from kiln.stream.order import StreamGapError, StreamState, assignment, merge_states
from kiln.stream.settings import client_config

__all__ = ["StreamGapError", "StreamState", "TokenConsumer", "assignment", "client_config", "merge_states",
           "publish_tokens", "serve_metrics"]


def __getattr__(name: str) -> object:
    # The clients import confluent-kafka and numpy; the pure parts above do not.
    if name == "TokenConsumer":
        from kiln.stream.consumer import TokenConsumer

        return TokenConsumer
    if name == "publish_tokens":
        from kiln.stream.producer import publish_tokens

        return publish_tokens
    if name == "serve_metrics":
        from kiln.stream.consumer import serve_metrics

        return serve_metrics
    raise AttributeError(name)
