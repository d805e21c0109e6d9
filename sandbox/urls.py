"""The sandbox's routes, mounted at /sandbox/ (docs/sandbox.md). API paths are exactly the
contract's: no trailing slash except on `faults/` and `ledger/`."""

from django.urls import path, re_path

from . import views
from .models import Provider

app_name = "sandbox"

LOOKUP_PROVIDERS = [
    Provider.RETURNS,
    Provider.WAREHOUSE,
    Provider.PAYMENTS,
    Provider.ACCOUNTING,
    Provider.SHIPPING,
    Provider.EMAIL,
]

urlpatterns = [
    path("", views.world, name="world"),
    # Lookups first: `warehouse/lookup/<key>` must not be read as the stock of a warehouse "lookup".
    *[
        path(f"api/{provider}/lookup/<str:key>", views.lookup_for(provider), name=f"{provider}_lookup")
        for provider in LOOKUP_PROVIDERS
    ],
    path("api/returns/start_return", views.start_return, name="start_return"),
    path("api/returns/cancel_pickup", views.cancel_pickup, name="cancel_pickup"),
    path("api/returns/collect", views.collect, name="collect"),
    path("api/warehouse/reserve", views.reserve, name="reserve"),
    path("api/warehouse/release", views.release, name="release"),
    path("api/warehouse/<str:code>/stock", views.warehouse_stock, name="warehouse_stock"),
    path("api/warehouse/<str:code>/configure", views.warehouse_configure, name="warehouse_configure"),
    path("api/payments/refund", views.refund, name="refund"),
    path("api/payments/reverse", views.reverse_refund, name="reverse_refund"),
    path("api/accounting/credit", views.credit, name="credit"),
    path("api/accounting/reverse_credit", views.reverse_credit, name="reverse_credit"),
    path("api/shipping/reship", views.reship, name="reship"),
    path("api/shipping/cancel", views.cancel_shipment, name="cancel_shipment"),
    path("api/shipping/advance", views.advance, name="advance"),
    path("api/email/notify_seller", views.notify_seller, name="notify_seller"),
    path("api/email/notify_customer", views.notify_customer, name="notify_customer"),
    path("api/erp/adjust_stock", views.adjust_stock, name="adjust_stock"),
    path("api/erp/adjustments", views.adjustments, name="adjustments"),
    path("api/orders/<str:order_id>/status", views.order_status, name="order_status"),
    path("api/orders/<str:order_id>/entitlement", views.entitlement, name="entitlement"),
    path(
        "api/orders/<str:order_id>/entitlement/configure",
        views.entitlement_configure,
        name="entitlement_configure",
    ),
    path("api/faults/", views.faults, name="faults"),
    path("api/ledger/", views.ledger, name="ledger"),
    path("api/calls/", views.calls, name="calls"),
    re_path(r"^api/(?P<rest>.*)$", views.not_found, name="not_found"),
]
