from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from annotation.api import views
from webhooks import api as webhooks_api

router = DefaultRouter()
router.register("families", views.FamilyViewSet, basename="family")
router.register("instances", views.InstanceViewSet, basename="instance")
router.register("tournaments", views.TournamentViewSet, basename="tournament")
router.register("human-judgements", views.HumanJudgementViewSet, basename="human-judgement")
router.register("judge-judgements", views.JudgeJudgementViewSet, basename="judge-judgement")
router.register("snapshots", views.SnapshotViewSet, basename="snapshot")
router.register("webhook-endpoints", webhooks_api.EndpointViewSet, basename="webhook-endpoint")
router.register("webhook-deliveries", webhooks_api.DeliveryViewSet, basename="webhook-delivery")

app_name = "api"
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("", include(router.urls)),
]
