"""``python -m actorsched.amqp --write-schema``: regenerate docs/schema.json from the models."""

from .protocol import main

raise SystemExit(main())
