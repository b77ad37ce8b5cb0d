"""Images in the admin: licensed uploads and links, shown as thumbnails."""


from django import forms
from django.contrib import admin
from django.utils.html import format_html

from annotation.admin.audit import AuditTrailMixin
from annotation.admin.paging import LargeTableAdminMixin
from annotation.collection.uploads import store_uploaded_image
from annotation.exceptions import AnnotationError
from annotation.image_urls import check_image_url
from annotation.models import (
    ImageAsset,
)


class ImageAssetForm(forms.ModelForm):
    upload = forms.FileField(required=False, help_text="JPEG, PNG, WebP or GIF; checked before it is stored.")

    class Meta:
        model = ImageAsset
        fields = ["upload", "url", "licence", "licence_url", "author", "source_url"]

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("upload")
        if not self.instance.pk and not upload and not cleaned.get("url"):
            raise forms.ValidationError("Upload an image or give its URL.")
        if upload and not self.errors:
            # The admin's save runs in the same transaction, so a later failure rolls this back.
            try:
                self.stored_image = store_uploaded_image(
                    upload=upload, **{field: cleaned.get(field, "") for field in
                                      ("licence", "licence_url", "author", "source_url")},
                )
            except AnnotationError as error:
                self.add_error("upload", str(error))
        return cleaned

    def clean_url(self):
        url = self.cleaned_data["url"]
        if url:
            try:
                check_image_url(url)
            except AnnotationError as error:
                raise forms.ValidationError(str(error)) from None
        return url


def thumbnail_html(image):
    """A small preview linking to the full image; the alt text is the image's readable name."""
    if image is None:
        return "-"
    src = image.browser_url
    if not src:
        # A link off the image allow-list is shown as text: the admin's browser never fetches it.
        return image.url or "-"
    return format_html('<a href="{}"><img class="admin-thumbnail" src="{}" alt="{}"></a>', src, src, str(image))


@admin.register(ImageAsset)
class ImageAssetAdmin(LargeTableAdminMixin, AuditTrailMixin, admin.ModelAdmin):
    form = ImageAssetForm
    list_display = ["id", "thumbnail", "name", "licence", "author", "width", "height", "created_at"]
    list_display_links = ["id", "name"]
    # Words of the name, link, author or licence, through one trigram index over the four
    # (migration 0029); a file's SHA-256 is pasted whole.
    search_fields = ["original_name", "url", "author", "licence", "sha256__exact"]
    search_help_text = "A word of the image's name, link, author or licence, or its SHA-256 whole."
    readonly_fields = ["thumbnail", "original_name", "width", "height", "sha256", "uploaded_by"]

    @admin.display(description="image")
    def thumbnail(self, image):
        return thumbnail_html(image)

    @admin.display(description="name", ordering="original_name")
    def name(self, image):
        return str(image)

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        # A stored image is replaced by uploading a new one, not by editing this row's file.
        return [field for field in fields if field != "upload"] if obj else fields

    def save_model(self, request, obj, form, change):
        stored = getattr(form, "stored_image", None)
        if stored is not None:
            obj.pk, obj.file, obj.sha256 = stored.pk, stored.file, stored.sha256
            obj.created_at = stored.created_at
        super().save_model(request, obj, form, change)
