"""Offers: how the node's chips are offered, as devices of one or more extended resources.

An :class:`~ascend_plugin.offers.base.Offer` turns the inventory into offered
devices (ID, resource name, the chip(s) behind it, health, what a container gets
for it); :class:`~ascend_plugin.offers.book.OfferBook` combines the node's offers
and groups their devices by resource. Whole chips are the first offer; shares
and vNPUs are further ones. The device-plugin server (and later the DRA driver)
consume offers and know nothing about how the devices were made.
"""
