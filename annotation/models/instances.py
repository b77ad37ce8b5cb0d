"""Instances: the benchmark's items, image(s) and an instruction of a family."""

from django.db import models
from django.db.models import Aggregate, Count, JSONField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce, JSONObject
from django.db.models.lookups import GreaterThan

from annotation.model_checks import StorableJSONField
from annotation.models.families import ImageAsset, InstructionFamily
from annotation.models.workers import Worker


class Instance(models.Model):
    """One benchmark item: image(s) and an instruction of a family, and where it is in the pipeline."""

    class Status(models.TextChoices):
        AWAITING_CAPTION = "awaiting_caption", "Awaiting caption"
        AWAITING_REFERENCE = "awaiting_reference", "Awaiting reference"
        AWAITING_VERIFICATION = "awaiting_verification", "Awaiting verification"
        VERIFIED = "verified", "Verified"
        DISCARDED = "discarded", "Discarded"

    family = models.ForeignKey(InstructionFamily, on_delete=models.PROTECT, related_name="instances")
    instruction = models.TextField()
    images = models.ManyToManyField(ImageAsset, through="InstanceImage", related_name="instances")
    author = models.ForeignKey(Worker, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="instructions_written")
    status = models.CharField(max_length=30, choices=Status.choices, default=Status.AWAITING_CAPTION,
                              db_index=True)
    current_caption = models.ForeignKey("Caption", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    # Which round of captioning the instance is in: 1, and one more each time verification sends
    # it back for a new caption. Its caption unit is made for this round, so the unit's identity
    # does not move while the round's captions come in.
    caption_round = models.PositiveSmallIntegerField(default=1)
    # The verified reference, once the instance is verified (collection/verification.py
    # verify_instance, whichever way it was verified): an imported sheet's human-written
    # reference_output as published, else the candidate verified correct. Battles, the
    # reference-backed judge and the exports read it.
    reference_output = models.TextField(blank=True)
    public_images_metadata = StorableJSONField(default=dict, blank=True)
    imported_from = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"#{self.pk} {self.family.name}: {self.instruction[:60]}"

    @property
    def is_multi_image(self):
        """In Python what `multi_image_q` says in SQL; uses prefetched images when there are any."""
        return self.family.is_multi_image or len(self.instanceimage_set.all()) > 1

    def ordered_images(self):
        if hasattr(self, "_page_images"):
            return self._page_images
        return [link.image for link in self.instanceimage_set.select_related("image")]

    def keep_page_images(self, rows):
        """Keep the images `page_images` fetched with this instance, for `ordered_images`."""
        rows = sorted(rows or [], key=lambda row: row["position"])
        self._page_images = [
            ImageAsset.from_db(self._state.db, list(_PAGE_IMAGE_FIELDS), [row[name] for name in _PAGE_IMAGE_FIELDS])
            for row in rows
        ]


# What a page shows of an image (`page_parts.gallery`); any other field is loaded when first read.
_PAGE_IMAGE_FIELDS = ("id", "file", "url", "width", "height", "licence", "author")


class _JSONArrayAgg(Aggregate):
    """The aggregated JSON values as one JSON array, on PostgreSQL and SQLite alike."""

    function = "JSONB_AGG"
    output_field = JSONField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, function="JSON_GROUP_ARRAY", **extra_context)


def page_images(instance_path):
    """The images of the instance at `instance_path` as one JSON value, so the query that fetches a
    work unit for its page fetches its gallery too (hand it to `Instance.keep_page_images`)."""
    rows = (
        InstanceImage.objects.filter(instance=OuterRef(instance_path)).order_by().values("instance")
        .annotate(rows=_JSONArrayAgg(JSONObject(
            position="position", **{name: f"image__{name}" for name in _PAGE_IMAGE_FIELDS})))
        .values("rows")
    )
    return Subquery(rows, output_field=JSONField())


def multi_image_q(instance_path="", *, every_row=False):
    """Multi-image as the benchmark counts it everywhere (Table 2, the two published sheets, the
    leaderboard's columns, the API filter): the family says so, or the instance has several images.

    `instance_path` is the lookup from the queried model to its instance ("" for Instance).
    `every_row`: for a query that reads every row (an aggregate over the table), the instances with
    several images are found once, as one set the rows are looked up in, instead of their images
    being counted again for each row: the same answer, without a subquery per row that makes
    PostgreSQL expect a costly plan and compile it (JIT) for longer than it runs.
    """
    prefix = f"{instance_path}__" if instance_path else ""
    if every_row:
        # Count("*"): the instance index alone answers it.
        several = (InstanceImage.objects.order_by().values("instance")
                   .annotate(n=Count("*")).filter(n__gt=1).values("instance"))
        return Q(**{f"{prefix}family__is_multi_image": True}) | Q(**{f"{instance_path or 'pk'}__in": several})
    image_count = (
        InstanceImage.objects.filter(instance=OuterRef(instance_path or "pk"))
        .order_by()
        .values("instance")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Q(**{f"{prefix}family__is_multi_image": True}) | Q(
        GreaterThan(Coalesce(Subquery(image_count), 0), 1)
    )


class InstanceImage(models.Model):
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE)
    image = models.ForeignKey(ImageAsset, on_delete=models.PROTECT)
    position = models.PositiveSmallIntegerField(default=0)
    blip2_caption = models.TextField(blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "position"], name="instance_image_position_unique"),
        ]

    def __str__(self):
        return f"Image {self.position + 1} of instance #{self.instance_id}"
