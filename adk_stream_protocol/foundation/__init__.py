"""The foundation every layer stands on: settings, limits, the host and origin policy, who is
asking, error texts, and which agent the server runs. Imports nothing of the package above it."""
