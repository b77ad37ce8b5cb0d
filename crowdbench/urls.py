from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.views.static import serve

from crowdbench.health import health
from frontend.landing import landing

urlpatterns = [
    path("", landing, name="landing"),
    path("admin/", admin.site.urls),
    path("health/", health, name="health"),
    path("dashboard/", include("frontend.urls")),
    path("api/", include("annotation.api.urls")),
    path("", include("frontend.annotator_urls")),
]

if not settings.AWS_STORAGE_BUCKET_NAME:
    # Local media in the embedded default; production serves media from S3.
    urlpatterns += [path(f"{settings.MEDIA_URL.strip('/')}/<path:path>", serve,
                         {"document_root": settings.MEDIA_ROOT})]
