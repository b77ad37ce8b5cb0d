"""Signed webhooks and e-mail notifications: the consumers of the events that crowdbench/events.py
emits. Each event owed to a researcher's URL or to the researchers' e-mail is a Delivery row,
written in the transaction of the change and sent by a background job with retries."""
