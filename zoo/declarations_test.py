from tests.testing import TestCase
from zoo import declarations, registry


class DeclarationsTest(TestCase):
    def test_the_source_read_declares_what_every_registered_class_takes(self):
        read = declarations.models()
        self.assertEqual(sorted(read), sorted(registry.names()))
        for name in registry.names():
            cls = registry.entry(name).cls
            self.assertEqual(read[name]["class"], cls.__name__, name)
            self.assertEqual(read[name]["hyperparameters"], cls.hyperparameter_names(), name)
            self.assertEqual(read[name]["required"], cls.required, name)

    def test_a_variant_is_its_parent_with_other_defaults(self):
        import inspect

        from zoo.models.deres_p import DeResP
        from zoo.models.deres_s import DeResS
        from zoo.models.lightsuan import LightSUAN
        from zoo.models.suan import SUAN

        for variant, parent in ((LightSUAN, SUAN), (DeResS, DeResP)):
            own = inspect.signature(variant.__init__).parameters
            inherited = inspect.signature(parent.__init__).parameters
            self.assertEqual(list(own), list(inherited))
            changed = {name: own[name].default for name in own if own[name].default != inherited[name].default}
            self.assertEqual(changed, variant.defaults)
            self.assertNotIn("def __init__", inspect.getsource(variant))  # declared by its defaults alone
        self.assertEqual(declarations.models()["lightsuan"]["hyperparameters"], SUAN.hyperparameter_names())
        self.assertEqual(declarations.models()["llama"]["required"], ("ffn_dim",))
