"""Checks of MTurk requests against botocore's service model that the Stubber leaves out.

botocore validates types, required members and minimum lengths, but not enums, patterns or
maximums. This walks `client.meta.service_model` and checks those too. Some members carry a
pattern in one shape and none in another (a QualificationRequirement's QualificationTypeId is a
plain string, while every other QualificationTypeId is an EntityId with `^[A-Z0-9]+$`); a member
without its own pattern borrows the one its name has elsewhere in the model.
"""

import re
from functools import lru_cache


def _walk_shapes(service_model):
    seen = set()
    stack = [service_model.operation_model(name).input_shape
             for name in service_model.operation_names]
    while stack:
        shape = stack.pop()
        if shape is None or shape.name in seen:
            continue
        seen.add(shape.name)
        yield shape
        if shape.type_name == "structure":
            stack.extend(shape.members.values())
        elif shape.type_name == "list":
            stack.append(shape.member)
        elif shape.type_name == "map":
            stack.extend([shape.key, shape.value])


@lru_cache(maxsize=4)
def _patterns_by_member_name(service_model):
    patterns = {}
    for shape in _walk_shapes(service_model):
        if shape.type_name != "structure":
            continue
        for name, member in shape.members.items():
            pattern = member.metadata.get("pattern")
            if member.type_name == "string" and pattern:
                patterns.setdefault(name, set()).add(pattern)
    # Only a name whose pattern is the same everywhere it has one is borrowed.
    return {name: next(iter(found)) for name, found in patterns.items() if len(found) == 1}


def problems(service_model, operation_name, params):
    """Everything in `params` that MTurk would refuse for its enums, patterns or maximums."""
    operation = service_model.operation_model(operation_name)
    borrowed = _patterns_by_member_name(service_model)
    found = []

    def check(shape, value, where, member_name=None):
        if value is None:
            return
        if shape.type_name == "structure" and isinstance(value, dict):
            for name, item in value.items():
                if name in shape.members:
                    check(shape.members[name], item, f"{where}.{name}", name)
            return
        if shape.type_name == "list" and isinstance(value, list | tuple):
            limit = shape.metadata.get("max")
            if limit is not None and len(value) > limit:
                found.append(f"{where} has {len(value)} items, more than {limit}")
            for index, item in enumerate(value):
                check(shape.member, item, f"{where}[{index}]", member_name)
            return
        if shape.type_name == "string" and isinstance(value, str):
            if shape.enum and value not in shape.enum:
                found.append(f"{where}={value!r} is not one of {shape.enum}")
            limit = shape.metadata.get("max")
            if limit is not None and len(value) > limit:
                found.append(f"{where} is {len(value)} characters, more than {limit}")
            pattern = shape.metadata.get("pattern") or borrowed.get(member_name or "")
            if pattern and not re.search(pattern, value):
                found.append(f"{where}={value!r} does not match {pattern}")
            return
        if shape.type_name in ("integer", "long") and isinstance(value, int):
            low, high = shape.metadata.get("min"), shape.metadata.get("max")
            if low is not None and value < low:
                found.append(f"{where}={value} is below {low}")
            if high is not None and value > high:
                found.append(f"{where}={value} is above {high}")

    if operation.input_shape is not None:
        check(operation.input_shape, params, operation_name)
    return found


def install(client):
    """Refuse, before it leaves us, any request of `client` that fails the checks above."""
    from mturk.exceptions import PlatformRequestError

    service_model = client.meta.service_model

    def before_call(params, model, **kwargs):
        found = problems(service_model, model.name, params)
        if found:
            raise PlatformRequestError(
                "MTurk would refuse this request: " + "; ".join(found), code="InvalidParameter",
                sent=False)

    client.meta.events.register("provide-client-params.mturk.*", before_call)
    return client
