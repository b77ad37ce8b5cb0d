"""Images and the instruction families researchers curate from them (paper §2.1, step 1)."""

from django.db import models
from django.db.models import Q

from annotation.image_urls import image_url_allowed
from annotation.model_checks import CheckedFields, StorableJSONField
from crowdbench.scoped_models import UniqueInEveryScope


class ImageAsset(CheckedFields, models.Model):
    """An image with its licence; either stored by us (upload) or referenced by URL."""

    file = models.ImageField(upload_to="images/%Y/%m/", blank=True, width_field="width",
                             height_field="height")
    url = models.URLField(max_length=1000, blank=True,
                          help_text="Where the image lives when we do not store it ourselves.")
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    licence = models.CharField(max_length=200, blank=True, help_text="e.g. CC BY 2.0, CC0, public domain")
    licence_url = models.URLField(max_length=500, blank=True)
    author = models.CharField(max_length=300, blank=True)
    source_url = models.URLField(max_length=1000, blank=True,
                                 help_text="The page the image was found on (e.g. Openverse).")
    uploaded_by = models.ForeignKey("Worker", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="images")
    original_name = models.CharField(
        max_length=255, blank=True,
        help_text="The uploaded file's own name, for people; the stored file is named by its content hash.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(file="") | ~Q(url=""), name="image_has_file_or_url",
                                   violation_error_message="An image needs a file or a URL."),
        ]

    def __str__(self):
        name = self.original_name or self.url or f"image #{self.pk}"
        return f"{name} ({self.width}×{self.height})" if self.width and self.height else name

    @property
    def display_url(self):
        return self.file.url if self.file else self.url

    @property
    def browser_url(self):
        """What a page may point a browser at: our stored file, or a link on an allowed host, else ""."""
        if self.file:
            return self.file.url
        return self.url if image_url_allowed(self.url) else ""


class InstructionFamily(CheckedFields, UniqueInEveryScope):
    class Source(models.TextChoices):
        NEW = "new", "New (written for this benchmark)"
        REFORMATTED = "reformatted", "Reformatted from an existing dataset"

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    skill_tags = StorableJSONField(default=list, blank=True,
                                  help_text='A JSON list, e.g. ["recognition", "reasoning"].')
    is_multi_image = models.BooleanField(default=False)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.NEW)
    source_dataset = models.CharField(max_length=200, blank=True)
    citation = models.TextField(blank=True, help_text="BibTeX or a reference for reformatted datasets.")
    seed_instruction = models.TextField(blank=True)
    seed_response = models.TextField(blank=True)
    seed_images = models.ManyToManyField(ImageAsset, through="SeedImage", blank=True,
                                         related_name="seed_of")
    target_instances = models.PositiveIntegerField(default=10)
    group = models.ForeignKey("annotation.ResearchGroup", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+",
                              help_text="The research group that owns it; empty: staff outside groups.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "instruction families"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(source="new") | ~Q(source_dataset=""),
                name="reformatted_family_names_its_dataset",
                violation_error_message="A family reformatted from another dataset names that dataset.",
            ),
        ]

    def __str__(self):
        return self.name


class SeedImage(models.Model):
    family = models.ForeignKey(InstructionFamily, on_delete=models.CASCADE)
    image = models.ForeignKey(ImageAsset, on_delete=models.PROTECT)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["family", "position"], name="seed_image_position_unique"),
        ]

    def __str__(self):
        return f"Seed image {self.position + 1} of {self.family}"
