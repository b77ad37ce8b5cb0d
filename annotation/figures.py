"""How a figure reads, wherever it is shown: money, durations and signed numbers, each written one
way on every page, export and message (issue 39)."""

from decimal import Decimal

UNKNOWN_PRICE = "price unknown"


def number_text(value, form="{:.0f}"):
    """`value` in `form`, "" for None, and never a negative zero ("-0.00" reads "0.00")."""
    if value is None:
        return ""
    text = form.format(value)
    if text.startswith("-") and not any(digit in text for digit in "123456789"):
        return text[1:]
    return text


def dollars(amount, *, unpriced=0):
    """A cost in US dollars to four places; "price unknown" when nothing of it had a known price
    (OPENAI_PRICES names no price for the model), and what is unknown said beside a partial sum."""
    amount = Decimal(0) if amount is None else Decimal(str(amount))
    if unpriced and not amount:
        return UNKNOWN_PRICE
    text = f"${amount:.4f}"
    if unpriced:
        text += f" + {unpriced} call{'s' if unpriced != 1 else ''} of unknown price"
    return text


def duration(seconds):
    """Seconds as a person reads them: "45 s", "3 min 48 s", "2 h 05 min"; "–" when unknown."""
    if seconds is None:
        return "–"
    whole = round(float(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
